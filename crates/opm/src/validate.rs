//! `opm validate`: loads and validates a catalog directory; exit 1 when it
//! is invalid, with the report (or, with `-o`, a structured result).

use std::process::ExitCode;

use anyhow::bail;
use olm_catalog::{
    fbc::{Catalog, LoadOptions},
    validate::validate_catalog,
};
use serde::Serialize;

use crate::cli::ValidateArgs;

#[derive(Serialize)]
struct ValidationResult {
    passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ValidationError>,
}

#[derive(Serialize)]
struct ValidationError {
    message: String,
}

pub(crate) fn run(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let directory = &args.directory;
    let meta = std::fs::metadata(directory)
        .map_err(|e| anyhow::anyhow!("stat {}: {e}", directory.display()))?;
    if !meta.is_dir() {
        bail!("{:?} is not a directory", directory.display().to_string());
    }
    if let Some(output) = &args.output
        && output != "json"
        && output != "yaml"
    {
        bail!("invalid --output value {output:?}, expected (json|yaml)");
    }
    // Payloads are checked as they are read and then left out, so memory
    // holds the catalog's structure, not its manifests.
    let options = LoadOptions {
        drop_payloads: true,
        ..LoadOptions::default()
    };
    let outcome = match Catalog::load_dir_with(directory, &options) {
        Err(error) => Err(error.to_string()),
        Ok(catalog) => {
            let report = validate_catalog(&catalog);
            for warning in report.warnings() {
                eprintln!("{warning}");
            }
            if report.is_valid() {
                Ok(())
            } else {
                let errors: Vec<String> = report.errors().map(ToString::to_string).collect();
                Err(errors.join("\n"))
            }
        }
    };
    match args.output.as_deref() {
        Some(format) => {
            let result = ValidationResult {
                passed: outcome.is_ok(),
                error: outcome.as_ref().err().map(|message| ValidationError {
                    message: message.clone(),
                }),
            };
            let text = if format == "json" {
                serde_json::to_string_pretty(&result)?
            } else {
                serde_yaml_ng::to_string(&result)?
            };
            println!("{text}");
        }
        None => {
            if let Err(message) = &outcome {
                eprintln!("{message}");
            }
        }
    }
    Ok(if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
