//! `opm generate dockerfile`: upstream's catalog Dockerfile, byte for byte,
//! except that the builder and base images default to this version's `opm`
//! image instead of upstream's `quay.io/operator-framework/opm:latest`: the
//! builder's `opm serve --cache-only` writes the cache the base's `opm
//! serve` reads, so both are the `opm` that serves the catalog.

use std::{collections::BTreeMap, path::Path, process::ExitCode};

use anyhow::bail;

use crate::{
    cli::DockerfileArgs,
    images::{CONFIGS_LOCATION_LABEL, DEFAULT_OPM_IMAGE},
};

pub(crate) fn run(args: &DockerfileArgs) -> anyhow::Result<ExitCode> {
    let base = args
        .binary_image
        .clone()
        .or_else(|| args.base_image.clone())
        .unwrap_or_else(|| DEFAULT_OPM_IMAGE.to_owned());
    let mut builder = args
        .builder_image
        .clone()
        .unwrap_or_else(|| DEFAULT_OPM_IMAGE.to_owned());
    if builder == "scratch" {
        bail!("invalid builder image: {builder:?}");
    }
    // Upstream's old behaviour: --binary-image alone also sets the builder.
    if args.binary_image.is_some() && args.builder_image.is_none() {
        builder = base.clone();
    }
    let labels = parse_labels(&args.extra_labels)?;
    let from_dir = clean(&args.dir);
    let (parent, index_name) = match from_dir.rsplit_once('/') {
        Some((parent, name)) => (format!("{parent}/"), name.to_owned()),
        None => (String::new(), from_dir.clone()),
    };
    let dockerfile = format!("{parent}{index_name}.Dockerfile");
    if Path::new(&dockerfile).exists() {
        bail!("path {dockerfile:?}: file already exists");
    }
    match std::fs::metadata(&from_dir) {
        Err(e) => bail!("stat {from_dir}: {e}"),
        Ok(meta) if !meta.is_dir() => bail!("provided root path {from_dir:?} is not a directory"),
        Ok(_) => {}
    }
    if base.is_empty() {
        bail!("base image is unset");
    }
    if index_name.is_empty() {
        bail!("index directory is unset");
    }
    std::fs::write(
        &dockerfile,
        dockerfile_text(&builder, &base, &index_name, &labels),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `key=value` pairs; the last value of a key wins.
fn parse_labels(labels: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut parsed = BTreeMap::new();
    for label in labels {
        let Some((key, value)) = label.split_once('=') else {
            bail!("invalid label {label:?}");
        };
        parsed.insert(key.to_owned(), value.to_owned());
    }
    Ok(parsed)
}

/// Go's `filepath.Clean`, enough for directory arguments.
fn clean(path: &Path) -> String {
    let text = path.to_string_lossy();
    let absolute = text.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Upstream's Dockerfile template, rendered.
pub(crate) fn dockerfile_text(
    builder: &str,
    base: &str,
    index_dir: &str,
    labels: &BTreeMap<String, String>,
) -> String {
    let mut out = format!(
        "# The builder image is expected to contain\n\
         # /bin/opm (with serve subcommand)\n\
         FROM {builder} as builder\n\
         \n\
         # Copy FBC root into image at /configs and pre-populate serve cache\n\
         ADD {index_dir} /configs\n\
         RUN [\"/bin/opm\", \"serve\", \"/configs\", \"--cache-dir=/tmp/cache\", \"--cache-only\"]\n\
         \n\
         FROM {base}\n"
    );
    if base == "scratch" {
        out.push_str(
            "# OLMv0 CatalogSources that use binary-less images must set:\n\
             # spec:\n\
             #   grpcPodConfig:\n\
             #     extractContent:\n\
             #       catalogDir: /configs\n\
             #       cacheDir: /tmp/cache\n",
        );
    } else {
        out.push_str(
            "# The base image is expected to contain\n\
             # /bin/opm (with serve subcommand) and /bin/grpc_health_probe\n\
             \n\
             # Configure the entrypoint and command\n\
             ENTRYPOINT [\"/bin/opm\"]\n\
             CMD [\"serve\", \"/configs\", \"--cache-dir=/tmp/cache\"]\n",
        );
    }
    out.push_str(&format!(
        "\n\
         COPY --from=builder /configs /configs\n\
         COPY --from=builder /tmp/cache /tmp/cache\n\
         \n\
         # Set FBC-specific label for the location of the FBC root directory\n\
         # in the image\n\
         LABEL {CONFIGS_LOCATION_LABEL}=/configs"
    ));
    if !labels.is_empty() {
        out.push_str("\n\n# Set other custom labels");
        for (key, value) in labels {
            out.push_str(&format!("\nLABEL \"{key}\"=\"{value}\""));
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_like_go() {
        for (input, want) in [
            ("catalog/", "catalog"),
            ("./catalog", "catalog"),
            ("a/../catalog", "catalog"),
            ("/tmp//x/", "/tmp/x"),
            ("../x", "../x"),
            (".", "."),
        ] {
            assert_eq!(clean(Path::new(input)), want, "{input}");
        }
    }

    #[test]
    fn labels_need_an_equals_sign_and_the_last_wins() {
        let labels = parse_labels(&["a=1".into(), "b=x=y".into(), "a=2".into()]).unwrap();
        assert_eq!(labels["a"], "2");
        assert_eq!(labels["b"], "x=y");
        assert!(parse_labels(&["novalue".into()]).is_err());
    }

    #[test]
    fn scratch_base_images_get_the_extract_content_note() {
        let text = dockerfile_text("b", "scratch", "catalog", &BTreeMap::new());
        assert!(text.contains("FROM scratch\n# OLMv0 CatalogSources"));
        assert!(!text.contains("ENTRYPOINT"));
        assert!(text.ends_with("=/configs\n"));
    }
}
