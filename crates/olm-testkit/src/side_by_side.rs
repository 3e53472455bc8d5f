//! Figures of ours and upstream's, side by side, for `cargo xtask bench
//! --vs-upstream`: one [`Row`] per measure with every run's value per
//! implementation, a table on stdout, and one results file and chart for
//! every scenario run so far ([`report`]).
//!
//! Two bench targets report through here: opm's (catalog, render,
//! validate, resolve: single processes) and the end-to-end one (install,
//! scale: controllers on the test control plane). Each run replaces the
//! rows of the scenarios it ran in `results.json` and keeps the others, so
//! the file and `ratios.png` always show the latest figure of each.
//!
//! Also here: reading a process's peak RSS and CPU time from `/proc`
//! ([`peak_rss_kib`], [`cpu_seconds`]), the one reader every bench uses.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::{Value, json};

/// Our implementation's column.
pub const OURS: &str = "ours";
/// Upstream's column.
pub const UPSTREAM: &str = "upstream";

/// The results file under the output folder.
pub const RESULTS_FILE: &str = "results.json";
/// The chart under the output folder.
pub const CHART_FILE: &str = "ratios.png";

/// One measure of one scenario on one input: each implementation's value
/// per run.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The scenario (`catalog`, `install`, ...).
    pub scenario: String,
    /// The input it ran on.
    pub input: String,
    /// What was measured.
    pub measure: String,
    /// The unit of every value.
    pub unit: String,
    /// Per implementation, in the order first pushed: its name and one
    /// value per run.
    pub values: Vec<(String, Vec<f64>)>,
}

impl Row {
    /// An empty row.
    pub fn new(scenario: &str, input: &str, measure: &str, unit: &str) -> Self {
        Self {
            scenario: scenario.to_owned(),
            input: input.to_owned(),
            measure: measure.to_owned(),
            unit: unit.to_owned(),
            values: Vec::new(),
        }
    }

    /// Adds one run's value for `who`.
    pub fn push(&mut self, who: &str, value: f64) {
        match self.values.iter_mut().find(|(w, _)| w == who) {
            Some((_, values)) => values.push(value),
            None => self.values.push((who.to_owned(), vec![value])),
        }
    }

    /// `who`'s median, if it has values.
    pub fn median(&self, who: &str) -> Option<f64> {
        self.values
            .iter()
            .find(|(w, v)| w == who && !v.is_empty())
            .map(|(_, v)| median(v))
    }

    /// `who`'s median over ours: above 1 means ours is ahead (every
    /// measure here is lower-is-better).
    pub fn ratio_of(&self, who: &str) -> Option<f64> {
        let ours = self.median(OURS)?;
        let theirs = self.median(who)?;
        (ours > 0.0).then(|| theirs / ours)
    }

    fn to_json(&self) -> Value {
        let per: serde_json::Map<String, Value> = self
            .values
            .iter()
            .map(|(who, v)| {
                let (lo, hi) = spread(v);
                (
                    who.clone(),
                    json!({"median": median(v), "min": lo, "max": hi, "runs": v}),
                )
            })
            .collect();
        let ratios: serde_json::Map<String, Value> = self
            .values
            .iter()
            .filter(|(who, _)| who != OURS)
            .filter_map(|(who, _)| self.ratio_of(who).map(|r| (who.clone(), json!(r))))
            .collect();
        json!({
            "scenario": self.scenario,
            "input": self.input,
            "measure": self.measure,
            "unit": self.unit,
            "values": per,
            "ratio_over_ours": ratios,
        })
    }

    /// A row read back from [`Row::to_json`]'s form; `None` when it is not.
    fn from_json(value: &Value) -> Option<Self> {
        let text = |key: &str| value.get(key)?.as_str().map(str::to_owned);
        let mut row = Self {
            scenario: text("scenario")?,
            input: text("input")?,
            measure: text("measure")?,
            unit: text("unit")?,
            values: Vec::new(),
        };
        for (who, figures) in value.get("values")?.as_object()? {
            let runs = figures
                .get("runs")?
                .as_array()?
                .iter()
                .map(Value::as_f64)
                .collect::<Option<Vec<f64>>>()?;
            row.values.push((who.clone(), runs));
        }
        Some(row)
    }
}

/// One implementation's figures from one run, as a measuring child
/// process prints them for [`run_alternating`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Measure, unit, value, in the order they are reported.
    pub values: Vec<(String, String, f64)>,
}

/// The line prefix a measuring child prints its [`Figures`] after.
pub const FIGURES_LINE: &str = "side-by-side figures: ";

impl Figures {
    /// Adds one figure.
    pub fn add(&mut self, measure: &str, unit: &str, value: f64) {
        self.values
            .push((measure.to_owned(), unit.to_owned(), value));
    }

    /// The figures as one [`FIGURES_LINE`] line, which [`Figures::parse`]
    /// reads back.
    pub fn line(&self) -> String {
        let items: Vec<Value> = self
            .values
            .iter()
            .map(|(m, u, v)| json!({"measure": m, "unit": u, "value": v}))
            .collect();
        format!("{FIGURES_LINE}{}", Value::Array(items))
    }

    /// Prints [`Figures::line`] on stdout, for the parent to read.
    #[allow(clippy::print_stdout)]
    pub fn print(&self) {
        println!("{}", self.line());
    }

    /// The figures of one [`FIGURES_LINE`] line, or `None` when `line` is
    /// not one.
    pub fn parse(line: &str) -> Option<Self> {
        let text = line.strip_prefix(FIGURES_LINE)?;
        let items: Vec<Value> = serde_json::from_str(text).ok()?;
        let mut figures = Self::default();
        for item in items {
            figures.add(
                item.get("measure")?.as_str()?,
                item.get("unit")?.as_str()?,
                item.get("value")?.as_f64()?,
            );
        }
        Some(figures)
    }
}

/// Which implementation goes first in run `run`: ours in even runs,
/// theirs in odd ones.
pub fn order(run: usize) -> [&'static str; 2] {
    if run.is_multiple_of(2) {
        [OURS, UPSTREAM]
    } else {
        [UPSTREAM, OURS]
    }
}

/// Runs this bench binary again once per implementation and run,
/// alternating which goes first, each as `<exe> --bench --one=<who>` with
/// `env` added; each child measures one implementation on a fresh control
/// plane of its own and prints its [`Figures`]. Echoes the children's
/// output, and returns one [`Row`] per measure of `scenario` on `input`.
/// Panics when a child fails or prints no figures.
#[allow(clippy::print_stdout)]
pub fn run_alternating(scenario: &str, input: &str, runs: usize, env: &[(&str, &str)]) -> Vec<Row> {
    use std::io::BufRead;
    let exe = std::env::current_exe().unwrap_or_else(|err| panic!("this bench's path: {err}"));
    let mut rows: Vec<Row> = Vec::new();
    for run in 0..runs {
        for who in order(run) {
            println!("--- {scenario}: run {run}, {who}");
            let mut child = Command::new(&exe)
                .args(["--bench", &format!("--one={who}")])
                .envs(env.iter().copied())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|err| panic!("running {}: {err}", exe.display()));
            let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
            let mut figures = None;
            for line in std::io::BufReader::new(stdout).lines() {
                let line = line.unwrap_or_else(|err| panic!("reading the child: {err}"));
                match Figures::parse(&line) {
                    Some(f) => figures = Some(f),
                    None => println!("  [{who} {run}] {line}"),
                }
            }
            let status = child
                .wait()
                .unwrap_or_else(|err| panic!("waiting for the child: {err}"));
            assert!(
                status.success(),
                "{scenario} ({who}, run {run}) failed: {status}"
            );
            let figures = figures
                .unwrap_or_else(|| panic!("{scenario} ({who}, run {run}) printed no figures"));
            for (measure, unit, value) in figures.values {
                let index = match rows.iter().position(|r| r.measure == measure) {
                    Some(i) => i,
                    None => {
                        rows.push(Row::new(scenario, input, &measure, &unit));
                        rows.len() - 1
                    }
                };
                rows[index].push(who, value);
            }
        }
    }
    rows
}

/// The controllers' side-by-side scenarios: [`run_alternating`] with each
/// child's control plane keeping an audit log (requests are counted from
/// it), then [`report`] into [`out_dir`] against upstream OLM.
pub fn run_on_control_planes(scenario: &str, input: &str, runs: usize) {
    let rows = run_alternating(scenario, input, runs, &[(crate::AUDIT_ENV, "1")]);
    let out = out_dir();
    if let Err(err) = std::fs::create_dir_all(&out) {
        panic!("{}: {err}", out.display());
    }
    let versions = [format!("OLM v{}", crate::assets::UPSTREAM_OLM_VERSION)];
    report(&rows, &out, &versions, runs);
}

/// The median of `values` (0 when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

/// The smallest and largest of `values`.
pub fn spread(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// Rows of `earlier` whose scenario is not among `fresh`'s, then `fresh`.
pub fn merge(earlier: Vec<Row>, fresh: &[Row]) -> Vec<Row> {
    let rerun: Vec<&str> = fresh.iter().map(|r| r.scenario.as_str()).collect();
    let mut rows: Vec<Row> = earlier
        .into_iter()
        .filter(|r| !rerun.contains(&r.scenario.as_str()))
        .collect();
    rows.extend_from_slice(fresh);
    rows
}

/// Prints `rows` as a table, then writes `out/results.json` (these rows
/// plus the rows of other scenarios already there) and `out/ratios.png`.
/// `versions` names what ran (`["opm v1.65.0"]`).
pub fn report(rows: &[Row], out: &Path, versions: &[String], runs: usize) {
    print_table(rows);
    println!(
        "ratio: theirs / ours, median of the runs (every measure is lower-is-better: above 1 means ours is ahead)\nmachine: {}",
        machine()
    );
    let json_path = out.join(RESULTS_FILE);
    let earlier: Vec<Row> = std::fs::read(&json_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|v| v.get("rows")?.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(Row::from_json)
        .collect();
    let all = merge(earlier, rows);
    let results = json!({
        "date": date(),
        "machine": machine(),
        "versions": versions,
        "runs": runs,
        "rows": all.iter().map(Row::to_json).collect::<Vec<_>>(),
    });
    let written = serde_json::to_string_pretty(&results)
        .map_err(|e| e.to_string())
        .and_then(|text| std::fs::write(&json_path, text).map_err(|e| e.to_string()));
    match written {
        Ok(()) => println!("wrote {}", json_path.display()),
        Err(why) => println!("could not write {}: {why}", json_path.display()),
    }
    let png = out.join(CHART_FILE);
    match chart(&all, &png) {
        Ok(()) => println!("wrote {}", png.display()),
        Err(why) => println!("no chart: {why}"),
    }
}

fn print_table(rows: &[Row]) {
    let mut columns: Vec<&str> = Vec::new();
    for row in rows {
        for (who, _) in &row.values {
            if !columns.contains(&who.as_str()) {
                columns.push(who);
            }
        }
    }
    let width =
        |f: &dyn Fn(&Row) -> usize, least: usize| rows.iter().map(f).fold(least, usize::max);
    let (scenario_w, input_w, measure_w) = (
        width(&|r| r.scenario.len(), 8),
        width(&|r| r.input.len(), 5),
        width(&|r| r.measure.len(), 7),
    );
    let mut header = format!(
        "\n{:<scenario_w$} {:<input_w$} {:<measure_w$}",
        "scenario", "input", "measure"
    );
    for who in &columns {
        header.push_str(&format!(" {who:>26}"));
    }
    for _ in columns.iter().filter(|w| **w != OURS) {
        header.push_str(&format!(" {:>10}", "ratio"));
    }
    println!("{header}");
    for row in rows {
        let mut line = format!(
            "{:<scenario_w$} {:<input_w$} {:<measure_w$}",
            row.scenario, row.input, row.measure
        );
        for who in &columns {
            let cell =
                row.values
                    .iter()
                    .find(|(w, _)| w == who)
                    .map_or_else(String::new, |(_, v)| {
                        let (lo, hi) = spread(v);
                        format!("{} ({}-{}) {}", fmt(median(v)), fmt(lo), fmt(hi), row.unit)
                    });
            line.push_str(&format!(" {cell:>26}"));
        }
        for who in columns.iter().filter(|w| **w != OURS) {
            let ratio = row
                .ratio_of(who)
                .map_or_else(String::new, |r| format!("{r:.1}x"));
            line.push_str(&format!(" {ratio:>10}"));
        }
        println!("{line}");
    }
}

/// A figure with as many decimals as it needs to be read.
pub fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A horizontal bar per measure: upstream / ours on a log scale, with a
/// line at 1x (parity).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_possible_wrap
)]
fn chart(rows: &[Row], path: &Path) -> Result<(), String> {
    use plotters::prelude::*;
    let font = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    ]
    .iter()
    .find_map(|p| std::fs::read(p).ok())
    .ok_or("no DejaVuSans.ttf to draw text with (Debian: fonts-dejavu-core)")?;
    plotters::style::register_font(
        "sans-serif",
        FontStyle::Normal,
        Box::leak(font.into_boxed_slice()),
    )
    .map_err(|_| "the font could not be read")?;

    let bars: Vec<(String, f64)> = rows
        .iter()
        .filter_map(|r| {
            r.ratio_of(UPSTREAM)
                .map(|x| (format!("{} {}: {}", r.scenario, r.input, r.measure), x))
        })
        .collect();
    if bars.is_empty() {
        return Err("no ratios".to_owned());
    }
    let (width, row_height, label_width) = (1100_u32, 22_u32, 520_i32);
    let height = 60 + row_height * bars.len() as u32 + 30;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let style = ("sans-serif", 14).into_font();
    root.draw(&Text::new(
        "upstream / ours, median of the runs (log scale; right of the line: ours ahead)",
        (10, 10),
        ("sans-serif", 16).into_font(),
    ))
    .map_err(|e| e.to_string())?;
    let max = bars
        .iter()
        .map(|(_, x)| x.log10())
        .fold(1.0_f64, f64::max)
        .ceil();
    let min = bars
        .iter()
        .map(|(_, x)| x.log10())
        .fold(-1.0_f64, f64::min)
        .floor();
    let plot_left = label_width + 10;
    let plot_width = f64::from(width as i32 - plot_left - 60);
    let x_of = |log: f64| plot_left + ((log - min) / (max - min) * plot_width) as i32;
    let top = 45;
    let bottom = top + (row_height * bars.len() as u32) as i32;
    for decade in (min as i32)..=(max as i32) {
        let x = x_of(f64::from(decade));
        let color = if decade == 0 {
            BLACK
        } else {
            RGBColor(200, 200, 200)
        };
        root.draw(&PathElement::new(vec![(x, top), (x, bottom)], color))
            .map_err(|e| e.to_string())?;
        let label = if decade >= 0 {
            format!("{}x", 10_f64.powi(decade))
        } else {
            format!("1/{}x", 10_f64.powi(-decade))
        };
        root.draw(&Text::new(label, (x - 10, bottom + 6), style.clone()))
            .map_err(|e| e.to_string())?;
    }
    for (i, (label, x)) in bars.iter().enumerate() {
        let y = top + (i as u32 * row_height) as i32;
        root.draw(&Text::new(label.clone(), (10, y + 3), style.clone()))
            .map_err(|e| e.to_string())?;
        let (a, b) = (x_of(0.0), x_of(x.log10()));
        let color = if *x >= 1.0 {
            RGBColor(46, 125, 50)
        } else {
            RGBColor(198, 40, 40)
        };
        root.draw(&Rectangle::new(
            [
                (a.min(b), y + 3),
                (a.max(b).max(a.min(b) + 1), y + row_height as i32 - 3),
            ],
            color.filled(),
        ))
        .map_err(|e| e.to_string())?;
        root.draw(&Text::new(
            format!("{x:.1}x"),
            (a.max(b) + 4, y + 3),
            style.clone(),
        ))
        .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// The time now, UTC, as `date -u` writes it.
pub fn date() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// CPUs, memory and load average of this machine.
#[allow(clippy::cast_precision_loss)]
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let mem =
        proc_field("/proc/meminfo", "MemTotal:").map_or(0.0, |kib| kib as f64 / (1024.0 * 1024.0));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "{cpus} CPUs, {mem:.0} GiB, load {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// The workspace's target folder: `CARGO_TARGET_DIR`, else `target` next
/// to this crate's workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || {
            // This crate is `crates/olm-testkit` in the workspace.
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .nth(2)
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            workspace.join("target")
        },
        PathBuf::from,
    )
}

/// Where `cargo xtask bench --vs-upstream` writes its inputs and results.
pub fn out_dir() -> PathBuf {
    target_dir().join("vs-upstream")
}

/// A `kB` field of a `/proc` file (`VmHWM:` of `/proc/<pid>/status`).
fn proc_field(file: &str, field: &str) -> Option<u64> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// A bench's count knob: the environment variable `name` as a number, or
/// `default` when it is unset or not a number.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A numeric field of `/proc/<pid>/status` (`"Threads:"`, `"RssAnon:"`;
/// sizes in KiB); `None` once the process has exited and been reaped.
pub fn proc_status(pid: u32, field: &str) -> Option<u64> {
    proc_field(&format!("/proc/{pid}/status"), field)
}

/// The peak resident set of process `pid` so far (the kernel's high-water
/// mark, `VmHWM`), in KiB; `None` once it has exited and been reaped.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    proc_status(pid, "VmHWM:")
}

/// The resident set of process `pid` now (`VmRSS`), in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    proc_status(pid, "VmRSS:")
}

/// User plus system CPU seconds process `pid` has used (`/proc/<pid>/stat`,
/// at the kernel's 100 ticks per second).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may
    // hold spaces; utime and stime are fields 14 and 15 of the line.
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_empty_runs() {
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < f64::EPSILON);
        assert!((median(&[4.0, 1.0, 2.0, 3.0]) - 2.5).abs() < f64::EPSILON);
        assert!(median(&[]).abs() < f64::EPSILON);
    }

    #[test]
    fn the_ratio_is_theirs_over_ours() {
        let mut row = Row::new("install", "bench", "p50", "s");
        row.push(OURS, 1.0);
        row.push(OURS, 3.0);
        row.push(UPSTREAM, 10.0);
        assert_eq!(row.ratio_of(UPSTREAM), Some(5.0));
        assert_eq!(row.ratio_of("nobody"), None);
        let mut zero = Row::new("x", "y", "z", "s");
        zero.push(OURS, 0.0);
        zero.push(UPSTREAM, 1.0);
        assert_eq!(zero.ratio_of(UPSTREAM), None, "no ratio over a zero");
    }

    #[test]
    fn rows_survive_the_results_file() {
        let mut row = Row::new("scale", "1,000 namespaces", "peak RSS", "MB");
        row.push(OURS, 40.5);
        row.push(UPSTREAM, 300.0);
        row.push(UPSTREAM, 310.0);
        assert_eq!(Row::from_json(&row.to_json()), Some(row));
        assert_eq!(Row::from_json(&json!({"scenario": "x"})), None);
    }

    #[test]
    fn a_rerun_scenario_replaces_its_rows_and_keeps_the_others() {
        let old_catalog = Row::new("catalog", "generated", "first answer", "s");
        let old_install = Row::new("install", "bench", "p50", "s");
        let mut new_install = Row::new("install", "bench", "p50", "s");
        new_install.push(OURS, 1.0);
        let merged = merge(
            vec![old_catalog.clone(), old_install],
            &[new_install.clone()],
        );
        assert_eq!(merged, vec![old_catalog, new_install]);
    }

    #[test]
    fn figures_survive_their_line() {
        let mut figures = Figures::default();
        figures.add("p50", "s", 1.25);
        figures.add("API requests per install", "requests", 42.0);
        let line = figures.line();
        assert_eq!(Figures::parse(&line), Some(figures));
        assert_eq!(Figures::parse("p50 1.25 s"), None);
        assert_eq!(
            Figures::parse(&format!("{FIGURES_LINE}[{{\"measure\": 1}}]")),
            None
        );
    }

    #[test]
    fn who_goes_first_alternates() {
        assert_eq!(order(0), [OURS, UPSTREAM]);
        assert_eq!(order(1), [UPSTREAM, OURS]);
        assert_eq!(order(2), order(0));
    }

    #[test]
    fn this_process_has_a_peak_rss_and_cpu_time() {
        let pid = std::process::id();
        // Read in this order: the peak read later is at least the RSS read
        // before it.
        let now = rss_kib(pid).expect("VmRSS of this process");
        let peak = peak_rss_kib(pid).expect("VmHWM of this process");
        assert!(peak >= now && now > 0, "peak {peak} now {now}");
        assert!(cpu_seconds(pid).is_some());
        assert!(proc_status(pid, "Threads:").is_some_and(|n| n >= 1));
        assert_eq!(peak_rss_kib(u32::MAX), None);
    }
}
