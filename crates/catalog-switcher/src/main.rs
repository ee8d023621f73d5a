//! catalog-switcher: fills `olm.catalogImageTemplate` annotations into catalog image references.
//!
//! The controller arrives with a later issue; this binary exists so the workspace has its
//! final shape.

fn main() {
    println!(
        "catalog-switcher {}: the image-template controller is not built yet",
        env!("CARGO_PKG_VERSION")
    );
}
