//! catalogd: turns `Catalog` objects into served, validated catalog content.
//!
//! The controller, sources, content store and HTTP content server arrive with issue #4; this
//! binary exists so the workspace, the chart and the images have their final shape.

fn main() {
    println!(
        "catalogd {}: the Catalog controller is not built yet (issue #4)",
        env!("CARGO_PKG_VERSION")
    );
}
