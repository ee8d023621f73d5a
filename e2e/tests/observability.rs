//! The chart's alerts, dashboard and the metrics reference, with no cluster: `promtool check
//! rules` and `promtool test rules` (Debian's prometheus) pass on files/alerts.yaml; the
//! rendered PrometheusRule is that file; every metric the managers define is in
//! docs/operations.md and nothing else is; every metric the alerts and the dashboard read is
//! one the managers define; every alert has its runbook.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap()
}

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(root())
        .output()
        .expect("promtool is installed (hack/prereqs.sh installs Debian's prometheus)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn the_alerts_pass_promtool_check_and_their_unit_tests() {
    let checked = promtool(&["check", "rules", "charts/olm/files/alerts.yaml"]);
    assert!(checked.contains("SUCCESS: 5 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "charts/olm/tests/alerts/alerts.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// The alerts of files/alerts.yaml.
fn alerts() -> Vec<serde_json::Value> {
    let file: serde_json::Value =
        serde_saphyr::from_str(&read("charts/olm/files/alerts.yaml")).unwrap();
    file["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn every_alert_fires_an_unit_test_and_has_a_runbook() {
    let tests = read("charts/olm/tests/alerts/alerts.test.yaml");
    let operations = read("docs/operations.md");
    for alert in alerts() {
        let name = alert["alert"].as_str().unwrap();
        assert!(
            tests.contains(&format!(
                "alertname: {name}\n    exp_alerts:\n    - exp_labels"
            )),
            "{name}: no promtool test in which it fires"
        );
        assert!(
            operations.contains(&format!("\n### {name}\n")),
            "{name}: no runbook section in docs/operations.md"
        );
        let url = alert["annotations"]["runbook_url"].as_str().unwrap();
        assert!(
            url.ends_with(&format!("docs/operations.md#{}", name.to_lowercase())),
            "{name}: {url}"
        );
        for key in ["summary", "description"] {
            assert!(alert["annotations"][key].is_string(), "{name}: no {key}");
        }
    }
}

#[test]
fn the_prometheus_rule_is_files_alerts_yaml_as_it_is() {
    let chart = root().join("charts/olm").display().to_string();
    let out = Command::new(olm_e2e::chart::helm().unwrap())
        .args([
            "template",
            "olm",
            &chart,
            "--set",
            "metrics.prometheusRule.enabled=true",
            "--show-only",
            "templates/monitoring.yaml",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rule: serde_json::Value =
        serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!(rule["kind"], "PrometheusRule");
    let file: serde_json::Value =
        serde_saphyr::from_str(&read("charts/olm/files/alerts.yaml")).unwrap();
    assert_eq!(rule["spec"], file);
}

/// Metric family names defined in the managers' sources (string literals).
fn defined() -> BTreeSet<String> {
    let prefixes = [
        "controller_runtime_",
        "leader_election_",
        "metrics_auth_",
        "catalogd_",
        "operator_controller_",
        "catalog_switcher_",
        "provisioner_",
    ];
    let mut names = BTreeSet::new();
    let mut dirs = vec![root().join("crates")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // Only sources: not tests, benches or fuzz targets.
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if !matches!(name.as_str(), "tests" | "benches" | "fuzz" | "target") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for literal in text.split('"').skip(1).step_by(2) {
                    let is_name = prefixes.iter().any(|p| literal.starts_with(p))
                        && literal.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                        && !literal.ends_with('_');
                    if is_name {
                        names.insert(literal.to_owned());
                    }
                }
            }
        }
    }
    names
}

/// Metric names in the tables of docs/operations.md's metrics reference.
fn documented() -> BTreeSet<String> {
    let operations = read("docs/operations.md");
    let start = operations.find("## Metrics reference").unwrap();
    let end = start + operations[start..].find("\n## Scraping").unwrap();
    operations[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_owned()))
        .collect()
}

#[test]
fn every_metric_is_documented_and_only_those() {
    let defined = defined();
    assert!(
        defined.contains("controller_runtime_reconcile_total"),
        "{defined:?}"
    );
    assert!(defined.contains("catalogd_catalogs"), "{defined:?}");
    let documented = documented();
    let missing: Vec<_> = defined.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&defined).collect();
    assert!(missing.is_empty(), "not in docs/operations.md: {missing:?}");
    assert!(
        stale.is_empty(),
        "documented but defined nowhere: {stale:?}"
    );
}

/// The metric names an expression reads (histogram series mapped to their family).
fn read_by(expr: &str, known: &BTreeSet<String>) -> Vec<String> {
    let mut names = Vec::new();
    let mut word = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        let family = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| word.strip_suffix(s))
            .unwrap_or(&word)
            .to_owned();
        let ours = [
            "controller_runtime_",
            "leader_election_",
            "catalogd_",
            "operator_controller_",
            "catalog_switcher_",
            "provisioner_",
        ]
        .iter()
        .any(|p| family.starts_with(p));
        if ours {
            names.push(if known.contains(&family) {
                family
            } else {
                word.clone()
            });
        }
        word.clear();
    }
    names
}

#[test]
fn the_alerts_and_the_dashboard_read_only_metrics_that_exist() {
    let defined = defined();
    let mut exprs: Vec<String> = alerts()
        .iter()
        .map(|a| a["expr"].as_str().unwrap().to_owned())
        .collect();
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("charts/olm/files/dashboard.json")).unwrap();
    assert_eq!(dashboard["uid"], "olm-rs");
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    for panel in panels {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "duplicate panel id"
        );
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().unwrap().to_owned());
        }
    }
    assert!(exprs.len() > 20, "{exprs:?}");
    let mut used = BTreeSet::new();
    for expr in &exprs {
        let names = read_by(expr, &defined);
        assert!(!names.is_empty(), "{expr} reads none of our metrics");
        for name in names {
            assert!(defined.contains(&name), "{expr}: {name} is defined nowhere");
            used.insert(name);
        }
    }
    // Each manager's own families are on the dashboard.
    for prefix in [
        "catalogd_",
        "operator_controller_",
        "catalog_switcher_",
        "leader_election_",
    ] {
        assert!(
            used.iter().any(|n| n.starts_with(prefix)),
            "nothing of {prefix}*"
        );
    }
}
