//! catalog-switcher: fills `olm.catalogImageTemplate` annotations into catalog image references.
//!
//! Wiring only: the flags ([`catalog_switcher::args`]) and the manager's steps
//! ([`catalog_switcher::manager`]), run by the shared runtime until SIGTERM.

use anyhow::Result;
use catalog_switcher::args::Args;
use catalog_switcher::manager::CatalogSwitcher;
use clap::Parser;

#[tokio::main]
async fn main() -> Result<()> {
    olm_runtime::manager::run(CatalogSwitcher(Args::parse())).await?;
    Ok(())
}
