//! operator-controller: resolves `Operator` objects to bundles and writes `BundleDeployment`s.
//!
//! The controller arrives with a later issue; this binary exists so the workspace has its
//! final shape.

fn main() {
    println!(
        "operator-controller {}: the Operator controller is not built yet",
        env!("CARGO_PKG_VERSION")
    );
}
