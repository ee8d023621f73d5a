//! Writes every CRD to `config/crd/` and the chart (`crds/`, or `templates/crd-*` for one a value
//! guards), or with `--check` fails when the
//! committed files differ from what the types generate.
//!
//! Usage: `crdgen [--check] [REPO_ROOT]` (the repository root defaults to the current directory).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let mut check = false;
    let mut root = PathBuf::from(".");
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!("usage: crdgen [--check] [REPO_ROOT]");
                return Ok(());
            }
            other => root = PathBuf::from(other),
        }
    }
    let mut stale = Vec::new();
    for file in olm_api::crds::render()? {
        let mut outputs = vec![(root.join("config/crd").join(&file.file_name), file.yaml)];
        if let Some(chart) = file.chart {
            outputs.push((root.join("charts/olm").join(chart.path), chart.text));
        }
        for (path, text) in outputs {
            if check {
                if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                    stale.push(path);
                }
            } else {
                write(&path, &text)?;
            }
        }
    }
    if !stale.is_empty() {
        let list: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
        bail!(
            "these CRD files differ from the Rust types; run `cargo run -p olm-api --bin crdgen`: {}",
            list.join(", ")
        );
    }
    Ok(())
}

fn write(path: &Path, yaml: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, yaml).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}
