//! Validation with the rules upstream `opm validate` enforces (operator-registry's
//! `ConvertToModel` and `model.Validate`), reporting every problem rather than the first, each
//! at the blob it concerns.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::model::{Channel, Fbc, Origin, Problem, Problems, schemas};
use crate::range::blang;

/// Every problem of the catalog (the first [`Problems::MAX_LISTED`] listed, sorted by file and
/// line; the rest counted). Empty means valid.
pub fn validate(fbc: &Fbc) -> Problems {
    let mut v = Validator {
        problems: Problems::new(),
    };
    let packages = v.packages(fbc);
    let bundle_index = v.bundles(fbc, &packages);
    v.channels(fbc, &packages, &bundle_index);
    v.deprecations(fbc, &packages);
    v.problems.sort();
    v.problems
}

struct Validator {
    problems: Problems,
}

impl Validator {
    fn at(&mut self, origin: &Origin, message: impl Into<String>) {
        self.problems.push(Problem::at(origin, message));
    }

    /// Package name → origin of its first definition.
    fn packages<'a>(&mut self, fbc: &'a Fbc) -> HashMap<&'a str, &'a Origin> {
        let mut seen: HashMap<&str, &Origin> = HashMap::new();
        let mut channels: HashMap<&str, HashSet<&str>> = HashMap::new();
        for c in &fbc.channels {
            channels
                .entry(c.package.as_str())
                .or_default()
                .insert(c.name.as_str());
        }
        for p in &fbc.packages {
            if p.name.is_empty() {
                self.at(&p.origin, "package has no name");
                continue;
            }
            if let Some(first) = seen.get(p.name.as_str()) {
                self.at(
                    &p.origin,
                    format!("duplicate package {:?} (first defined at {first})", p.name),
                );
                continue;
            }
            seen.insert(&p.name, &p.origin);
            if !crate::names::is_dns1123_subdomain(&p.name) {
                self.at(
                    &p.origin,
                    format!("package name {:?} is not a valid DNS-1123 subdomain (lowercase letters, digits, '-' and '.')", p.name),
                );
            }
            let own = channels.get(p.name.as_str());
            if own.is_none_or(|c| c.is_empty()) {
                self.at(
                    &p.origin,
                    format!("package {:?} must contain at least one channel", p.name),
                );
            }
            if p.default_channel.is_empty() {
                self.at(
                    &p.origin,
                    format!("package {:?} has no defaultChannel", p.name),
                );
            } else if own.is_some_and(|c| !c.is_empty() && !c.contains(p.default_channel.as_str()))
            {
                self.at(
                    &p.origin,
                    format!(
                        "default channel {:?} of package {:?} not found in its channels",
                        p.default_channel, p.name
                    ),
                );
            }
        }
        seen
    }

    /// (package, bundle) → index into `fbc.bundles` of its first definition.
    fn bundles<'a>(
        &mut self,
        fbc: &'a Fbc,
        packages: &HashMap<&str, &Origin>,
    ) -> HashMap<(&'a str, &'a str), usize> {
        let mut index: HashMap<(&str, &str), usize> = HashMap::new();
        let mut in_channel: HashSet<(&str, &str)> = HashSet::new();
        for c in &fbc.channels {
            for e in &c.entries {
                in_channel.insert((c.package.as_str(), e.name.as_str()));
            }
        }
        // package → version → bundle names, for the duplicate-version rule.
        let mut versions: BTreeMap<&str, BTreeMap<String, BTreeSet<&str>>> = BTreeMap::new();
        for (i, b) in fbc.bundles.iter().enumerate() {
            let o = &b.origin;
            if b.name.is_empty() {
                self.at(o, "bundle has no name");
                continue;
            }
            if b.package.is_empty() {
                self.at(
                    o,
                    format!("package name must be set for bundle {:?}", b.name),
                );
                continue;
            }
            if !packages.contains_key(b.package.as_str()) {
                self.at(
                    o,
                    format!("unknown package {:?} for bundle {:?}", b.package, b.name),
                );
            }
            if let Some(&first) = index.get(&(b.package.as_str(), b.name.as_str())) {
                self.at(
                    o,
                    format!(
                        "duplicate bundle {:?} in package {:?} (first defined at {})",
                        b.name, b.package, fbc.bundles[first].origin
                    ),
                );
                continue;
            }
            index.insert((&b.package, &b.name), i);
            let pkg_props: Vec<_> = b.package_properties().collect();
            if pkg_props.len() != 1 {
                self.at(
                    o,
                    format!(
                        "package {:?} bundle {:?} must have exactly 1 \"olm.package\" property, found {}",
                        b.package,
                        b.name,
                        pkg_props.len()
                    ),
                );
            }
            if let Some(p) = pkg_props.first() {
                if p.package_name != b.package {
                    self.at(
                        o,
                        format!(
                            "bundle {:?}: package {:?} does not match \"olm.package\" property {:?}",
                            b.name, b.package, p.package_name
                        ),
                    );
                }
                match crate::range::parse_bundle_version(&p.version) {
                    Ok(v) => {
                        versions
                            .entry(&b.package)
                            .or_default()
                            .entry(v.to_string())
                            .or_default()
                            .insert(&b.name);
                    }
                    Err(e) => self.at(
                        o,
                        format!(
                            "bundle {:?} has an invalid version {:?}: {e}",
                            b.name, p.version
                        ),
                    ),
                }
            }
            if !in_channel.contains(&(b.package.as_str(), b.name.as_str())) {
                self.at(
                    o,
                    format!(
                        "package {:?}, bundle {:?} not found in any channel entries",
                        b.package, b.name
                    ),
                );
            }
            if b.image.is_empty() && !b.has_objects() {
                self.at(o, format!("bundle {:?}: bundle image must be set", b.name));
            }
            for r in b.required_packages() {
                if let Err(e) = blang::Range::parse(&r.version_range) {
                    self.at(
                        o,
                        format!(
                            "bundle {:?}: olm.package.required on {:?} has an invalid versionRange {:?}: {e}",
                            b.name, r.package_name, r.version_range
                        ),
                    );
                }
            }
        }
        for (package, by_version) in versions {
            let dups: Vec<String> = by_version
                .iter()
                .filter(|(_, names)| names.len() > 1)
                .map(|(v, names)| {
                    format!(
                        "{{{v}: [{}]}}",
                        names.iter().copied().collect::<Vec<_>>().join(", ")
                    )
                })
                .collect();
            if !dups.is_empty()
                && let Some(origin) = packages.get(package)
            {
                self.at(
                    origin,
                    format!(
                        "package {package:?}: duplicate versions found in bundles: [{}]",
                        dups.join(" ")
                    ),
                );
            }
        }
        index
    }

    fn channels(
        &mut self,
        fbc: &Fbc,
        packages: &HashMap<&str, &Origin>,
        bundles: &HashMap<(&str, &str), usize>,
    ) {
        let mut seen: HashMap<(&str, &str), &Origin> = HashMap::new();
        for c in &fbc.channels {
            let o = &c.origin;
            if c.name.is_empty() {
                self.at(
                    o,
                    format!("package {:?} contains a channel with no name", c.package),
                );
                continue;
            }
            if !packages.contains_key(c.package.as_str()) {
                self.at(
                    o,
                    format!("unknown package {:?} for channel {:?}", c.package, c.name),
                );
            }
            if let Some(first) = seen.get(&(c.package.as_str(), c.name.as_str())) {
                self.at(
                    o,
                    format!(
                        "duplicate channel {:?} in package {:?} (first defined at {first})",
                        c.name, c.package
                    ),
                );
                continue;
            }
            seen.insert((&c.package, &c.name), o);
            if !crate::names::is_dns1123_subdomain(&c.name) {
                self.at(
                    o,
                    format!(
                        "channel name {:?} is not a valid DNS-1123 subdomain",
                        c.name
                    ),
                );
            }
            self.channel_graph(c, bundles);
        }
    }

    fn channel_graph(&mut self, c: &Channel, bundles: &HashMap<(&str, &str), usize>) {
        let o = &c.origin;
        let prefix = format!("invalid channel {:?} of package {:?}", c.name, c.package);
        if c.entries.is_empty() {
            self.at(
                o,
                format!("{prefix}: channel must contain at least one bundle"),
            );
            return;
        }
        let mut entries: HashMap<&str, &super::model::ChannelEntry> = HashMap::new();
        for e in &c.entries {
            if e.name.is_empty() {
                self.at(o, format!("{prefix}: an entry has no name"));
                continue;
            }
            if entries.insert(&e.name, e).is_some() {
                self.at(o, format!("{prefix}: duplicate entry {:?}", e.name));
            }
            if !bundles.contains_key(&(c.package.as_str(), e.name.as_str())) {
                self.at(
                    o,
                    format!(
                        "{prefix}: entry {:?} refers to no olm.bundle of package {:?}",
                        e.name, c.package
                    ),
                );
            }
            for (i, s) in e.skips.iter().enumerate() {
                if s.is_empty() {
                    self.at(
                        o,
                        format!("{prefix}: entry {:?}: skip[{i}] is empty", e.name),
                    );
                }
            }
            if let Some(r) = &e.skip_range
                && let Err(err) = blang::Range::parse(r)
            {
                self.at(
                    o,
                    format!(
                        "{prefix}: entry {:?} has an invalid skipRange {r:?}: {err}",
                        e.name
                    ),
                );
            }
        }
        // Heads: entries no other entry replaces or skips.
        let mut incoming: HashSet<&str> = HashSet::new();
        let mut skipped: HashSet<&str> = HashSet::new();
        for e in entries.values() {
            if let Some(r) = &e.replaces {
                incoming.insert(r);
            }
            for s in &e.skips {
                incoming.insert(s);
                skipped.insert(s);
            }
        }
        let mut heads: Vec<&str> = entries
            .keys()
            .copied()
            .filter(|n| !incoming.contains(n))
            .collect();
        heads.sort_unstable();
        let head = match heads.as_slice() {
            [] => return self.at(o, format!("{prefix}: no channel head found in graph")),
            [one] => *one,
            many => {
                return self.at(
                    o,
                    format!(
                        "{prefix}: multiple channel heads found in graph: {}",
                        many.join(", ")
                    ),
                );
            }
        };
        // Walk the replaces chain from the head; stop at a skipped target.
        let mut chain: Vec<&str> = vec![head];
        let mut on_chain: HashSet<&str> = HashSet::from([head]);
        let mut cur = entries.get(head).copied();
        while let Some(e) = cur {
            let Some(next) = e.replaces.as_deref() else {
                break;
            };
            if skipped.contains(next) {
                break;
            }
            chain.push(next);
            if !on_chain.insert(next) {
                let start = chain.iter().position(|n| *n == next).unwrap_or(0);
                return self.at(
                    o,
                    format!(
                        "{prefix}: detected cycle in replaces chain of upgrade graph: {}",
                        chain[start..].join(" -> ")
                    ),
                );
            }
            cur = entries.get(next).copied();
        }
        let mut stranded: Vec<&str> = entries
            .keys()
            .copied()
            .filter(|n| !on_chain.contains(n) && !skipped.contains(n))
            .collect();
        stranded.sort_unstable();
        if !stranded.is_empty() {
            self.at(
                o,
                format!(
                    "{prefix}: channel contains one or more stranded bundles: {}",
                    stranded.join(", ")
                ),
            );
        }
    }

    fn deprecations(&mut self, fbc: &Fbc, packages: &HashMap<&str, &Origin>) {
        let channels: HashSet<(&str, &str)> = fbc
            .channels
            .iter()
            .map(|c| (c.package.as_str(), c.name.as_str()))
            .collect();
        let bundles: HashSet<(&str, &str)> = fbc
            .bundles
            .iter()
            .map(|b| (b.package.as_str(), b.name.as_str()))
            .collect();
        let mut seen: HashMap<&str, &Origin> = HashMap::new();
        for d in &fbc.deprecations {
            let o = &d.origin;
            if d.package.is_empty() {
                self.at(o, "olm.deprecations blob has no package");
                continue;
            }
            if let Some(first) = seen.insert(&d.package, o) {
                self.at(
                    o,
                    format!(
                        "package {:?} has more than one olm.deprecations blob (first at {first})",
                        d.package
                    ),
                );
                continue;
            }
            if !packages.contains_key(d.package.as_str()) {
                self.at(
                    o,
                    format!("olm.deprecations for unknown package {:?}", d.package),
                );
                continue;
            }
            let mut refs = HashSet::new();
            for e in &d.entries {
                let what = if e.name.is_empty() {
                    e.schema.clone()
                } else {
                    format!("{} {:?}", e.schema, e.name)
                };
                if e.message.is_empty() {
                    self.at(
                        o,
                        format!(
                            "deprecation of {what} in package {:?} has no message",
                            d.package
                        ),
                    );
                }
                if !refs.insert((e.schema.as_str(), e.name.as_str())) {
                    self.at(
                        o,
                        format!("duplicate deprecation of {what} in package {:?}", d.package),
                    );
                }
                let known = match e.schema.as_str() {
                    "" => {
                        self.at(
                            o,
                            format!(
                                "a deprecation entry of package {:?} has no reference schema",
                                d.package
                            ),
                        );
                        continue;
                    }
                    schemas::PACKAGE if e.name.is_empty() => true,
                    schemas::PACKAGE => {
                        self.at(
                            o,
                            format!(
                                "deprecation of olm.package in package {:?} must not name anything",
                                d.package
                            ),
                        );
                        continue;
                    }
                    schemas::CHANNEL => channels.contains(&(d.package.as_str(), e.name.as_str())),
                    schemas::BUNDLE => bundles.contains(&(d.package.as_str(), e.name.as_str())),
                    other => {
                        self.at(
                            o,
                            format!(
                                "deprecation entry of package {:?} has unknown schema {other:?}",
                                d.package
                            ),
                        );
                        continue;
                    }
                };
                if !known {
                    self.at(
                        o,
                        format!(
                            "deprecation references unknown {what} in package {:?}",
                            d.package
                        ),
                    );
                }
            }
        }
    }
}
