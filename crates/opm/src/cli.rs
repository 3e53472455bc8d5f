//! The command line, flag for flag as upstream's cobra commands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::images::DEFAULT_OPM_IMAGE;
pub(crate) use crate::images::TlsOptions;

/// operator package manager
#[derive(Debug, Parser)]
#[command(
    name = "opm",
    about = "operator package manager",
    long_about = "CLI to interact with operator-registry and build indexes of operator content.\n\nTo view help related to alpha features, set HELP_ALPHA=true in the environment."
)]
pub(crate) struct Cli {
    /// Skip TLS certificate verification for container image registries while pulling bundles or index (deprecated: use --use-http and --skip-tls-verify)
    #[arg(long, global = true, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub skip_tls: Option<bool>,
    /// Skip TLS certificate verification for container image registries while pulling bundles
    #[arg(long, global = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub skip_tls_verify: Option<bool>,
    /// Use plain HTTP for container image registries while pulling bundles
    #[arg(long, global = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub use_http: Option<bool>,
    /// Enable debug logging
    #[arg(long, hide = true)]
    pub debug: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// Checks the flag combinations as upstream's `GetTLSOptions` does.
    pub(crate) fn tls_options(&self) -> anyhow::Result<TlsOptions> {
        let skip_tls_verify = self.skip_tls_verify.unwrap_or(false);
        let use_http = self.use_http.unwrap_or(false);
        if self.skip_tls.is_some() && self.use_http.is_some() {
            anyhow::bail!("invalid flag combination: cannot use --use-http with --skip-tls");
        }
        if self.skip_tls.is_some() && self.skip_tls_verify.is_some() {
            anyhow::bail!("invalid flag combination: cannot use --skip-tls-verify with --skip-tls");
        }
        if skip_tls_verify && use_http {
            anyhow::bail!(
                "invalid flag combination: --use-http and --skip-tls-verify cannot both be true"
            );
        }
        if self.skip_tls == Some(true) {
            return Ok(TlsOptions {
                skip_tls_verify: false,
                use_http: true,
            });
        }
        Ok(TlsOptions {
            skip_tls_verify,
            use_http,
        })
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Generate an olm.package declarative config blob
    Init(InitArgs),
    /// Generate a stream of file-based catalog objects from catalogs and bundles
    Render(RenderArgs),
    /// Validate the declarative index config
    Validate(ValidateArgs),
    /// serve declarative configs
    Serve(ServeArgs),
    /// Generate various artifacts for file-based catalogs
    #[command(subcommand)]
    Generate(Generate),
    /// Print the opm version
    Version,
    /// Run an alpha subcommand
    #[command(subcommand, hide = true)]
    Alpha(Alpha),
}

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// The package name
    #[arg(value_name = "packageName")]
    pub package: String,
    /// The channel that subscriptions will default to if unspecified
    #[arg(short = 'c', long, default_value = "")]
    pub default_channel: String,
    /// Path to package's icon
    #[arg(short = 'i', long)]
    pub icon: Option<PathBuf>,
    /// Path to the operator's README.md (or other documentation)
    #[arg(short = 'd', long)]
    pub description: Option<PathBuf>,
    /// Output format (json|yaml)
    #[arg(short = 'o', long, default_value = "json")]
    pub output: String,
}

#[derive(Debug, Args)]
pub(crate) struct RenderArgs {
    /// Catalog images, catalog directories, bundle images and bundle directories
    #[arg(
        required = true,
        value_name = "catalog-image | catalog-directory | bundle-image | bundle-directory"
    )]
    pub refs: Vec<String>,
    /// Output format of the streamed file-based catalog objects (json|yaml)
    #[arg(short = 'o', long, default_value = "json")]
    pub output: String,
    /// Name of the last migration to run (default: none)
    #[arg(long, conflicts_with = "migrate")]
    pub migrate_level: Option<String>,
    /// Perform all available schema migrations on the rendered FBC
    #[arg(long)]
    pub migrate: bool,
    /// When bundle image reference information is unavailable, populate it with this template
    #[arg(long, hide = true)]
    pub alpha_image_ref_template: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// The catalog directory
    #[arg(value_name = "directory")]
    pub directory: PathBuf,
    /// Output format for validation results (json|yaml)
    #[arg(short = 'o', long)]
    pub output: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The catalog directory
    #[arg(value_name = "source_path")]
    pub source: PathBuf,
    /// enable debug logging
    #[arg(long)]
    pub debug: bool,
    /// path to a container termination log file
    #[arg(short = 't', long, default_value = "/dev/termination-log")]
    pub termination_log: PathBuf,
    /// port number to serve on
    #[arg(short = 'p', long, default_value = "50051")]
    pub port: String,
    /// address of startup profiling endpoint (addr:port format); accepted, not served
    #[arg(long, default_value = "localhost:6060")]
    pub pprof_addr: String,
    /// capture pprof CPU profiles; accepted, ignored
    #[arg(long)]
    pub pprof_capture_profiles: bool,
    /// if set, sync and persist server cache directory
    #[arg(long, default_value = "")]
    pub cache_dir: String,
    /// sync the serve cache and exit without serving
    #[arg(long)]
    pub cache_only: bool,
    /// exit with error if cache is not present or has been invalidated
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub cache_enforce_integrity: Option<bool>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Generate {
    /// Generate a Dockerfile for a file-based catalog
    Dockerfile(DockerfileArgs),
}

#[derive(Debug, Args)]
pub(crate) struct DockerfileArgs {
    /// The FBC root directory
    #[arg(value_name = "fbcRootDir")]
    pub dir: PathBuf,
    /// Image in which to build catalog (deprecated: use --base-image)
    #[arg(long, conflicts_with = "base_image", hide = true)]
    pub binary_image: Option<String>,
    /// Image base to use to build catalog.
    #[arg(short = 'i', long)]
    pub base_image: Option<String>,
    /// Image to use as a build stage.
    #[arg(short = 'b', long)]
    pub builder_image: Option<String>,
    /// Extra labels to include in the generated Dockerfile. Labels should be of the form 'key=value'.
    #[arg(short = 'l', long, value_delimiter = ',')]
    pub extra_labels: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Alpha {
    /// Render a catalog template (auto-detects type from schema if TYPE not specified)
    RenderTemplate(RenderTemplateArgs),
    /// Bundle images
    #[command(subcommand)]
    Bundle(AlphaBundle),
    /// Catalog images
    #[command(subcommand)]
    Catalog(AlphaCatalog),
}

#[derive(Debug, Args)]
pub(crate) struct RenderTemplateArgs {
    /// `[TYPE] [FILE]`: the template type (basic) and file (`-` or none for stdin)
    #[arg(num_args = 0..=2)]
    pub args: Vec<String>,
    /// Output format (json|yaml|mermaid)
    #[arg(short = 'o', long, default_value = "json")]
    pub output: String,
    /// Name of the last migration to run (default: none)
    #[arg(long)]
    pub migrate_level: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AlphaBundle {
    /// Build a bundle image from a bundle directory and push it, with no container engine
    Push(PushArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum AlphaCatalog {
    /// Build a catalog image from a file-based catalog directory and push it, with no container engine
    Push(CatalogPushArgs),
}

#[derive(Debug, Args)]
pub(crate) struct PushArgs {
    /// The directory
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The image reference to push to
    #[arg(value_name = "IMAGE")]
    pub image: String,
    /// Reach the image's registry over plain HTTP (for loopback registries)
    #[arg(long)]
    pub insecure: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CatalogPushArgs {
    #[command(flatten)]
    pub push: PushArgs,
    /// Image to build the catalog image on; its /bin/opm serves /configs. "scratch" builds an image of the catalog alone, with no entrypoint
    #[arg(long, default_value = DEFAULT_OPM_IMAGE)]
    pub base_image: String,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn tls_flag_combinations_follow_upstream() {
        let parse = |args: &[&str]| {
            let mut all = vec!["opm"];
            all.extend_from_slice(args);
            Cli::try_parse_from(all).unwrap().tls_options()
        };
        assert!(parse(&["--use-http", "--skip-tls-verify"]).is_err());
        assert!(parse(&["--skip-tls", "--use-http"]).is_err());
        assert!(parse(&["--skip-tls", "--skip-tls-verify"]).is_err());
        assert!(parse(&["--skip-tls=true"]).unwrap().use_http);
        assert!(parse(&["--use-http"]).unwrap().use_http);
        assert!(!parse(&[]).unwrap().use_http);
    }

    #[test]
    fn catalogs_are_built_on_this_versions_opm_image_by_default() {
        let cli = Cli::try_parse_from(["opm", "alpha", "catalog", "push", "dir", "image"]).unwrap();
        let Some(Command::Alpha(Alpha::Catalog(AlphaCatalog::Push(args)))) = cli.command else {
            panic!("not catalog push: {cli:?}");
        };
        assert_eq!(args.base_image, DEFAULT_OPM_IMAGE);
        let reference = olm_oci::Reference::parse(DEFAULT_OPM_IMAGE).unwrap();
        assert_eq!(reference.registry(), "ghcr.io");
        assert_eq!(reference.tag(), Some(env!("CARGO_PKG_VERSION")));
    }
}
