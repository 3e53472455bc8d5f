//! `go_json::reencode` streams: re-encoding a wide document (an array or an
//! object of many small elements, which is what a hostile catalog document
//! of `MAX_DOCUMENT_BYTES` would be) takes memory about the size of the
//! text, not a tree of values many times its size.
//!
//! The memory is measured as the growth of the peak resident set (Linux's
//! `VmHWM`) of a child process that runs one case, so that neither other
//! tests nor memory the allocator kept from earlier cases blur it.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{fmt::Write as _, process::Command};

use olm_catalog::go_json::reencode;

/// Set in the child process to the case it measures.
const CASE_VARIABLE: &str = "OLM_CATALOG_REENCODE_MEMORY_CASE";

/// A field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: usize = line.trim().trim_end_matches("kB").trim().parse().unwrap();
    kib * 1024
}

/// `[1,1,...,1]` of `n` elements.
fn wide_array(n: usize) -> String {
    let mut json = String::with_capacity(2 * n + 1);
    json.push('[');
    for i in 0..n {
        json.push_str(if i == 0 { "1" } else { ",1" });
    }
    json.push(']');
    json
}

/// An object of `n` keys in descending order (so that each must be moved),
/// every value a small array.
fn wide_object(n: usize) -> String {
    let mut json = String::with_capacity(16 * n + 2);
    json.push('{');
    for i in (0..n).rev() {
        if json.len() > 1 {
            json.push(',');
        }
        write!(json, "\"k{i:07}\":[{}]", i % 10).unwrap();
    }
    json.push('}');
    json
}

/// An array of `n` small objects with their keys out of order and repeated.
fn many_objects(n: usize) -> String {
    let mut json = String::from("[");
    for i in 0..n {
        if i > 0 {
            json.push(',');
        }
        json.push_str(r#"{"b":"x","a":1.50,"b":"y"}"#);
    }
    json.push(']');
    json
}

#[test]
fn small_wide_documents_reencode_as_before() {
    assert_eq!(reencode(&wide_array(5), false, 1).unwrap(), "[1,1,1,1,1]");
    assert_eq!(
        reencode(&wide_object(3), false, 2).unwrap(),
        r#"{"k0000000":[0],"k0000001":[1],"k0000002":[2]}"#
    );
    assert_eq!(
        reencode(&many_objects(2), false, 2).unwrap(),
        r#"[{"a":1.5,"b":"y"},{"a":1.5,"b":"y"}]"#
    );
}

fn case(name: &str) -> String {
    match name {
        "array" => wide_array(2_000_000),
        "object" => wide_object(250_000),
        "objects" => many_objects(150_000),
        _ => panic!("unknown case {name}"),
    }
}

/// Before re-encoding streamed (building a tree of values first), the
/// peak grew by 68 MB for the 4 MB array (17x: a 32-byte node per element,
/// in vectors that double), 75 MB for the object (20x) and 118 MB for the
/// array of objects (29x); now by about 1x, 2.5x and 0.7x.
#[test]
fn wide_documents_take_memory_about_the_size_of_the_text() {
    if let Ok(name) = std::env::var(CASE_VARIABLE) {
        // The child: the input is built (without slack, so the peak so far
        // is what is held now); measure what re-encoding adds to the peak.
        let json = case(&name);
        let before = status_bytes("VmRSS").max(status_bytes("VmHWM"));
        let out = reencode(&json, false, 3).unwrap();
        let peak = status_bytes("VmHWM").saturating_sub(before);
        assert!(out.len() <= json.len());
        println!("measured: {} {peak}", json.len());
        return;
    }
    for name in ["array", "object", "objects"] {
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "wide_documents_take_memory_about_the_size_of_the_text",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CASE_VARIABLE, name)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&child.stdout);
        assert!(child.status.success(), "{name}: {stdout}");
        let (input, peak) = stdout
            .lines()
            .find_map(|line| Some(line.split_once("measured: ")?.1))
            .and_then(|m| m.split_once(' '))
            .map(|(i, p)| (i.parse::<usize>().unwrap(), p.parse::<usize>().unwrap()))
            .unwrap_or_else(|| panic!("{name}: no measurement in {stdout}"));
        eprintln!(
            "{name}: {input} bytes in, peak grew by {peak} bytes ({:.2}x)",
            peak as f64 / input as f64
        );
        assert!(
            peak <= 3 * input,
            "{name}: {input} bytes of input, the peak grew by {peak} bytes"
        );
    }
}
