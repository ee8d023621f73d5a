//! What the Table columns show that no single blob says: a package's latest version, a
//! channel's head, whether a bundle is deprecated, what its CSV supports. Worked out once per
//! served content (by its hash) in one pass over `all.json`, and small: a few strings per
//! bundle.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufRead;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// A package's columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageSummary {
    /// `defaultChannel`.
    pub default_channel: String,
    /// The highest version of its bundles.
    pub latest: Option<semver::Version>,
    /// Deprecated by an `olm.deprecations` entry.
    pub deprecated: bool,
}

/// A channel's columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelSummary {
    /// The entry no other entry replaces or skips (the highest version when several).
    pub head: Option<String>,
    /// How many entries it has.
    pub entries: usize,
    /// Deprecated by an `olm.deprecations` entry.
    pub deprecated: bool,
}

/// A bundle's columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleSummary {
    /// The version of its `olm.package` property.
    pub version: Option<String>,
    /// Deprecated by an `olm.deprecations` entry.
    pub deprecated: bool,
    /// The install modes its CSV supports, in the CSV's order.
    pub install_modes: Vec<String>,
    /// How many webhooks its CSV defines; `None` when the catalog carries no CSV for it.
    pub webhooks: Option<usize>,
}

/// The columns of one catalog's content.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// By package name.
    pub packages: HashMap<String, PackageSummary>,
    /// By (package, channel).
    pub channels: HashMap<(String, String), ChannelSummary>,
    /// By (package, bundle).
    pub bundles: HashMap<(String, String), BundleSummary>,
}

/// Reads `all.json` once. Lines that are not JSON objects are skipped (the store wrote them
/// after validating them; this only reads).
///
/// # Errors
///
/// When the content cannot be read.
pub fn summarize(reader: impl BufRead) -> std::io::Result<Summary> {
    let mut summary = Summary::default();
    // Per (package, channel): each entry's name and the names it replaces or skips.
    let mut edges: HashMap<(String, String), (Vec<String>, BTreeSet<String>)> = HashMap::new();
    for line in reader.split(b'\n') {
        let line = line?;
        let Ok(Value::Object(blob)) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let text = |k: &str| blob.get(k).and_then(Value::as_str).unwrap_or_default();
        let (schema, package, name) = (text("schema"), text("package"), text("name"));
        match schema {
            "olm.package" => {
                let entry = summary.packages.entry(name.to_owned()).or_default();
                entry.default_channel = text("defaultChannel").to_owned();
            }
            "olm.channel" => {
                let entries = blob
                    .get("entries")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let key = (package.to_owned(), name.to_owned());
                let (names, replaced) = edges.entry(key.clone()).or_default();
                for entry in entries {
                    let field = |k: &str| entry.get(k).and_then(Value::as_str);
                    if let Some(n) = field("name") {
                        names.push(n.to_owned());
                    }
                    if let Some(r) = field("replaces") {
                        replaced.insert(r.to_owned());
                    }
                    for skipped in entry
                        .get("skips")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if let Some(s) = skipped.as_str() {
                            replaced.insert(s.to_owned());
                        }
                    }
                }
                summary.channels.entry(key).or_default().entries = entries.len();
            }
            "olm.bundle" => {
                let bundle = bundle_summary(&blob);
                summary
                    .bundles
                    .entry((package.to_owned(), name.to_owned()))
                    .and_modify(|b| {
                        let deprecated = b.deprecated;
                        *b = bundle.clone();
                        b.deprecated = deprecated;
                    })
                    .or_insert(bundle);
            }
            "olm.deprecations" => deprecations(&mut summary, package, &blob),
            _ => {}
        }
    }
    // Latest versions, then heads (which prefer the highest version among several).
    let mut latest: HashMap<&str, semver::Version> = HashMap::new();
    let mut versions: HashMap<(&str, &str), semver::Version> = HashMap::new();
    for ((package, bundle), b) in &summary.bundles {
        let Some(v) = b
            .version
            .as_deref()
            .and_then(|v| semver::Version::parse(v).ok())
        else {
            continue;
        };
        versions.insert((package, bundle), v.clone());
        let best = latest.entry(package).or_insert_with(|| v.clone());
        if v > *best {
            *best = v;
        }
    }
    let latest: BTreeMap<String, semver::Version> =
        latest.into_iter().map(|(p, v)| (p.to_owned(), v)).collect();
    let mut heads: Vec<((String, String), String)> = Vec::new();
    for ((package, channel), (names, replaced)) in &edges {
        let head = names
            .iter()
            .filter(|n| !replaced.contains(*n))
            .max_by_key(|n| versions.get(&(package.as_str(), n.as_str())))
            .cloned();
        if let Some(head) = head {
            heads.push(((package.clone(), channel.clone()), head));
        }
    }
    for (key, head) in heads {
        if let Some(channel) = summary.channels.get_mut(&key) {
            channel.head = Some(head);
        }
    }
    for (package, version) in latest {
        summary.packages.entry(package).or_default().latest = Some(version);
    }
    Ok(summary)
}

/// A bundle's version, install modes and webhooks, from its properties.
fn bundle_summary(blob: &serde_json::Map<String, Value>) -> BundleSummary {
    let mut out = BundleSummary::default();
    let properties = blob
        .get("properties")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut csv_modes: Option<Vec<String>> = None;
    for property in properties {
        let value = property.get("value");
        match property.get("type").and_then(Value::as_str) {
            Some("olm.package") => {
                out.version = value
                    .and_then(|v| v.get("version"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            Some("olm.csv.metadata") => {
                out.install_modes = supported_modes(value.and_then(|v| v.get("installModes")));
            }
            Some("olm.bundle.object") => {
                let Some(csv) = value.and_then(csv_of) else {
                    continue;
                };
                let spec = csv.get("spec");
                out.webhooks = Some(
                    spec.and_then(|s| s.get("webhookdefinitions"))
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len),
                );
                csv_modes = Some(supported_modes(spec.and_then(|s| s.get("installModes"))));
            }
            _ => {}
        }
    }
    if out.install_modes.is_empty() {
        out.install_modes = csv_modes.unwrap_or_default();
    }
    out
}

/// The `ClusterServiceVersion` an `olm.bundle.object` property carries, if it is one.
fn csv_of(value: &Value) -> Option<Value> {
    let data = value.get("data").and_then(Value::as_str)?;
    let bytes = STANDARD.decode(data).ok()?;
    let object: Value = serde_json::from_slice(&bytes).ok()?;
    (object.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion")).then_some(object)
}

fn supported_modes(modes: Option<&Value>) -> Vec<String> {
    modes
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("supported").and_then(Value::as_bool) == Some(true))
        .filter_map(|m| m.get("type").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Marks what an `olm.deprecations` blob deprecates.
fn deprecations(summary: &mut Summary, package: &str, blob: &serde_json::Map<String, Value>) {
    for entry in blob
        .get("entries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let reference = entry.get("reference");
        let field = |k: &str| {
            reference
                .and_then(|r| r.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match field("schema").as_str() {
            "olm.package" => {
                summary
                    .packages
                    .entry(package.to_owned())
                    .or_default()
                    .deprecated = true;
            }
            "olm.channel" => {
                summary
                    .channels
                    .entry((package.to_owned(), field("name")))
                    .or_default()
                    .deprecated = true;
            }
            "olm.bundle" => {
                summary
                    .bundles
                    .entry((package.to_owned(), field("name")))
                    .or_default()
                    .deprecated = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Lines of any shape (the store validated them, but this reader must not rely on it)
        /// are summarized or skipped, never a panic.
        #[test]
        fn any_lines_are_summarized_or_skipped(lines in proptest::collection::vec(
            prop_oneof![
                ".{0,40}".prop_map(|s| s),
                Just(r#"{"schema":"olm.channel","package":"p","name":"c","entries":[{"name":"a","replaces":"a"},{"name":3}]}"#.to_owned()),
                Just(r#"{"schema":"olm.bundle","package":"p","name":"a","properties":[{"type":"olm.bundle.object","value":{"data":"!!"}},{"type":"olm.package","value":{"version":7}}]}"#.to_owned()),
                Just(r#"{"schema":"olm.deprecations","package":"p","entries":[{"reference":{"schema":"olm.channel"}}, 5]}"#.to_owned()),
            ],
            0..12,
        )) {
            let text = lines.join("\n");
            let _ = summarize(text.as_bytes());
        }
    }

    const CONTENT: &str = r#"{"schema":"olm.package","name":"etcd","defaultChannel":"stable","icon":{"base64data":"AAAA","mediatype":"image/png"}}
{"schema":"olm.channel","package":"etcd","name":"stable","entries":[{"name":"etcd.v0.9.0"},{"name":"etcd.v0.9.2","replaces":"etcd.v0.9.0"},{"name":"etcd.v0.9.4","replaces":"etcd.v0.9.2","skips":["etcd.v0.9.3"]}]}
{"schema":"olm.bundle","package":"etcd","name":"etcd.v0.9.0","image":"x","properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"0.9.0"}}]}
{"schema":"olm.bundle","package":"etcd","name":"etcd.v0.9.2","image":"x","properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"0.9.2"}},{"type":"olm.csv.metadata","value":{"installModes":[{"type":"OwnNamespace","supported":true},{"type":"AllNamespaces","supported":false}]}}]}
{"schema":"olm.bundle","package":"etcd","name":"etcd.v0.9.4","image":"x","properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"0.9.4"}},{"type":"olm.bundle.object","value":{"data":"eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIiwic3BlYyI6eyJ3ZWJob29rZGVmaW5pdGlvbnMiOlt7fSx7fV0sImluc3RhbGxNb2RlcyI6W3sidHlwZSI6IkFsbE5hbWVzcGFjZXMiLCJzdXBwb3J0ZWQiOnRydWV9XX19"}}]}
{"schema":"olm.deprecations","package":"etcd","entries":[{"reference":{"schema":"olm.bundle","name":"etcd.v0.9.0"},"message":"old"}]}
"#;

    #[test]
    fn columns_of_a_small_catalog() {
        let s = summarize(CONTENT.as_bytes()).unwrap();
        let etcd = &s.packages["etcd"];
        assert_eq!(etcd.default_channel, "stable");
        assert_eq!(etcd.latest, Some(semver::Version::new(0, 9, 4)));
        let stable = &s.channels[&("etcd".into(), "stable".into())];
        assert_eq!(stable.head.as_deref(), Some("etcd.v0.9.4"));
        assert_eq!(stable.entries, 3);
        let old = &s.bundles[&("etcd".into(), "etcd.v0.9.0".into())];
        assert!(old.deprecated);
        assert_eq!(old.webhooks, None);
        let mid = &s.bundles[&("etcd".into(), "etcd.v0.9.2".into())];
        assert_eq!(mid.install_modes, ["OwnNamespace"]);
        let new = &s.bundles[&("etcd".into(), "etcd.v0.9.4".into())];
        assert_eq!(new.webhooks, Some(2));
        assert_eq!(new.install_modes, ["AllNamespaces"]);
        assert!(!new.deprecated);
    }
}
