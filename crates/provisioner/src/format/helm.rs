//! helm+v3 (`core-rukpak-io-helm`): a chart, rendered by Helm itself (`helm template`, run by
//! [`crate::render`]). What is decided here, without running anything: where the chart is in
//! the bundle, the command line, and what Helm's refusals mean (reason and message).
//!
//! The command renders as `helm install` would, without a cluster: the release named after the
//! BundleDeployment, in its namespace, with the cluster's `.Capabilities` given by flags, CRDs
//! of `crds/` included, and no hooks (as rukpak and operator-controller applied only a
//! release's manifest: a hook is a Job run once around an install, which an applied set that
//! is kept and restored cannot be). `lookup` returns nothing (no cluster is reachable);
//! `getHostByName` too (DNS is off unless `--enable-dns`, which is never passed).

use crate::bundle::Tree;
use crate::render::capabilities::Capabilities;
use crate::status::reasons;

/// The chart's own file.
pub const CHART_FILE: &str = "Chart.yaml";

/// Why a chart cannot be rendered, in Helm's words where Helm said it.
pub type HelmError = crate::source::Refusal;

/// The chart's directory in `tree`: its root when it has a `Chart.yaml` (a chart in a bundle
/// image), else the one directory at its root that has one (a Helm OCI chart artifact holds
/// `<name>/Chart.yaml`).
pub fn chart_dir(tree: &Tree) -> Result<String, HelmError> {
    if tree.get(CHART_FILE).is_some() {
        return Ok(".".into());
    }
    let charts: Vec<&str> = tree
        .read_dir("")
        .into_iter()
        .filter(|(path, content)| {
            content.is_none() && tree.get(&format!("{path}/{CHART_FILE}")).is_some()
        })
        .map(|(path, _)| path)
        .collect();
    match charts.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(HelmError {
            reason: reasons::BUNDLE_LOAD_FAILED,
            message: format!(
                "no {CHART_FILE} at the bundle's root nor in a directory at its root: a helm+v3 bundle is a Helm chart (a chart directory in an image, or a Helm OCI chart artifact)"
            ),
        }),
        several => Err(HelmError {
            reason: reasons::BUNDLE_LOAD_FAILED,
            message: format!(
                "the bundle holds {} charts ({}): a helm+v3 bundle is one chart, its dependencies vendored in its charts/ directory",
                several.len(),
                several.join(", ")
            ),
        }),
    }
}

/// What to render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job<'a> {
    /// The release name (the BundleDeployment's).
    pub release: &'a str,
    /// The release namespace.
    pub namespace: &'a str,
    /// The chart's directory, relative to where Helm runs (the bundle's root).
    pub chart: &'a str,
    /// The values files, in the order they are merged.
    pub values: Vec<String>,
    /// The cluster, as `.Capabilities` tells it.
    pub capabilities: &'a Capabilities,
}

/// `helm`'s arguments for `job`.
pub fn args(job: &Job<'_>) -> Vec<String> {
    // The chart's directory is the bundle's to name: as `./<dir>`, never taken for a flag.
    let chart = if job.chart == "." {
        ".".to_owned()
    } else {
        format!("./{}", job.chart)
    };
    let mut args: Vec<String> = [
        "template",
        job.release,
        &chart,
        "--namespace",
        job.namespace,
        "--include-crds",
        "--no-hooks",
    ]
    .map(str::to_owned)
    .into();
    let caps = job.capabilities;
    if !caps.kube_version.is_empty() {
        args.extend(["--kube-version".into(), caps.kube_version.clone()]);
    }
    if !caps.api_versions.is_empty() {
        args.extend(["--api-versions".into(), caps.api_versions.join(",")]);
    }
    for file in &job.values {
        args.extend(["--values".into(), file.clone()]);
    }
    args
}

/// What Helm's error `stderr` means, with `names` (a scratch path, what it stands for)
/// replaced so that the message speaks of what the user wrote.
pub fn refusal(stderr: &str, names: &[(String, String)]) -> HelmError {
    let mut message = stderr.trim().trim_start_matches("Error: ").to_owned();
    for (path, name) in names {
        message = message.replace(path.as_str(), name);
    }
    let reason = if message.contains("values don't meet the specifications of the schema") {
        reasons::INVALID_VALUES
    } else if message.contains("missing in charts/ directory") {
        message.push_str(
            " (charts are rendered without network: vendor the chart's dependencies in its charts/ directory, for example with `helm dependency build`, before packaging it)",
        );
        reasons::DEPENDENCY_NOT_VENDORED
    } else if message.contains("failed to parse")
        && names
            .iter()
            .any(|(_, n)| !n.is_empty() && message.contains(n.as_str()))
    {
        reasons::INVALID_VALUES
    } else {
        reasons::RENDER_FAILED
    };
    HelmError { reason, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHART: &str = "apiVersion: v2\nname: demo\nversion: 0.1.0\n";

    #[test]
    fn a_chart_at_the_root_or_in_one_directory_is_found() {
        let root = Tree::new()
            .file("Chart.yaml", CHART)
            .file("templates/a.yaml", "");
        assert_eq!(chart_dir(&root), Ok(".".into()));
        // A Helm OCI artifact's layer: <name>/Chart.yaml.
        let artifact = Tree::new()
            .file("demo/Chart.yaml", CHART)
            .file("demo/charts/dep/Chart.yaml", CHART);
        assert_eq!(chart_dir(&artifact), Ok("demo".into()));
    }

    #[test]
    fn no_chart_or_several_are_refused_saying_what_was_found() {
        let none = Tree::new().file("manifests/a.yaml", "");
        let err = chart_dir(&none).unwrap_err();
        assert!(
            err.message
                .starts_with("no Chart.yaml at the bundle's root"),
            "{err}"
        );
        let two = Tree::new()
            .file("a/Chart.yaml", CHART)
            .file("b/Chart.yaml", CHART);
        let err = chart_dir(&two).unwrap_err();
        assert!(err.message.contains("2 charts (a, b)"), "{err}");
    }

    #[test]
    fn the_command_renders_as_an_install_would_without_a_cluster() {
        let caps = Capabilities {
            kube_version: "v1.36.3".into(),
            api_versions: vec!["apps/v1".into(), "v1".into()],
            ..Capabilities::default()
        };
        let job = Job {
            release: "shop",
            namespace: "shop-ns",
            chart: "demo",
            values: vec!["/s/values-0.yaml".into(), "/s/values-1.yaml".into()],
            capabilities: &caps,
        };
        assert_eq!(
            args(&job).join(" "),
            "template shop ./demo --namespace shop-ns --include-crds --no-hooks --kube-version v1.36.3 --api-versions apps/v1,v1 --values /s/values-0.yaml --values /s/values-1.yaml"
        );
        // A directory named like a flag stays a path.
        let flag = Job {
            chart: "--enable-dns",
            ..job.clone()
        };
        assert_eq!(args(&flag)[2], "./--enable-dns");
        // Never: DNS, validation against a cluster, a repository, post-renderers.
        for flag in [
            "--enable-dns",
            "--validate",
            "--repo",
            "--post-renderer",
            "--dependency-update",
        ] {
            assert!(!args(&job).iter().any(|a| a == flag), "{flag}");
        }
    }

    #[test]
    fn helm_refusals_become_reasons_in_the_users_words() {
        let names = [(
            "/tmp/render-x/values-1.yaml".to_owned(),
            "spec.config.values".to_owned(),
        )];
        let schema = refusal(
            "Error: values don't meet the specifications of the schema(s) in the following chart(s):\ndemo:\n- replicaCount: Invalid type. Expected: integer, given: string\n",
            &names,
        );
        assert_eq!(schema.reason, reasons::INVALID_VALUES);
        assert!(
            schema.message.starts_with("values don't meet"),
            "{}",
            schema.message
        );
        let yaml = refusal(
            "Error: failed to parse /tmp/render-x/values-1.yaml: error converting YAML to JSON: yaml: line 1: did not find expected key",
            &names,
        );
        assert_eq!(yaml.reason, reasons::INVALID_VALUES);
        assert!(
            yaml.message
                .starts_with("failed to parse spec.config.values:"),
            "{}",
            yaml.message
        );
        let deps = refusal(
            "Error: found in Chart.yaml, but missing in charts/ directory: common",
            &names,
        );
        assert_eq!(deps.reason, reasons::DEPENDENCY_NOT_VENDORED);
        assert!(deps.message.contains("vendor the chart's dependencies"));
        // A template Helm cannot parse is the chart's fault, not the values'.
        let chart = refusal(
            "Error: parse error at (demo/templates/a.yaml:3): failed to parse template",
            &[("/tmp/render-x/bundle/".to_owned(), String::new())],
        );
        assert_eq!(chart.reason, reasons::RENDER_FAILED);
        let template = refusal(
            "Error: template: demo/templates/a.yaml:3:5: executing \"demo/templates/a.yaml\" at <fail \"no\">: error calling fail: no",
            &names,
        );
        assert_eq!(template.reason, reasons::RENDER_FAILED);
    }
}
