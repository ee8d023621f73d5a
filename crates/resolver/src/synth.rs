//! A synthetic catalog generator for benchmarks, calibrated to real public catalogs: by
//! default about 300 packages, 5,000 bundles and 25 MB of FBC JSON, with `replaces` chains,
//! `skips` lists of up to 90 (pruned) bundles, `skipRange`s, and 10% of bundles carrying
//! dependencies. Deterministic for a given seed.
//!
//! Dependencies always point at packages with a lower index, so requesting packages
//! `0..n` (see [`package_name`]) always gives a satisfiable problem.

use std::fmt::Write;

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// Number of packages.
    pub packages: usize,
    /// Number of bundles, spread unevenly over the packages.
    pub bundles: usize,
    /// Approximate bytes of CSV description per bundle (real bundles carry 2–8 KB).
    pub description_bytes: usize,
    /// One bundle in this many has dependencies.
    pub dependency_every: usize,
    /// The longest `skips` list.
    pub max_skips: usize,
    /// PRNG seed.
    pub seed: u64,
    /// The first this many packages get one more bundle, `99.0.0`, the new head of both
    /// channels: the same catalog otherwise, as after a release (for benchmarks of a content
    /// change).
    pub new_heads: usize,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            packages: 300,
            bundles: 5_000,
            description_bytes: 3_900,
            dependency_every: 10,
            max_skips: 90,
            seed: 42,
            new_heads: 0,
        }
    }
}

/// splitmix64: small, fast and good enough for shaping test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// The name of package `i`.
pub fn package_name(i: usize) -> String {
    format!("operator-{i:03}")
}

/// The version of bundle `j` of a package.
fn version(j: usize) -> String {
    format!("{}.{}.{}", 1 + j / 20, (j / 4) % 5, j % 4)
}

const WORDS: &[&str] = &[
    "operator",
    "manages",
    "the",
    "lifecycle",
    "of",
    "clusters",
    "with",
    "automated",
    "upgrades",
    "backups",
    "monitoring",
    "and",
    "scaling",
    "for",
    "production",
    "workloads",
    "on",
    "Kubernetes",
    "using",
    "custom",
    "resources",
    "that",
    "describe",
    "desired",
    "state",
    "reconciled",
    "continuously",
    "by",
    "a",
    "controller",
];

/// Bundle counts per package: uneven (a few long histories, many short ones), summing to
/// `total`, each at least 1.
fn bundle_counts(rng: &mut Rng, packages: usize, total: usize) -> Vec<usize> {
    let weights: Vec<u64> = (0..packages)
        .map(|_| 1 + (rng.next() % 100).pow(2) / 100)
        .collect();
    let sum: u64 = weights.iter().sum();
    let spare = total.saturating_sub(packages);
    let mut counts: Vec<usize> = weights
        .iter()
        .map(|w| 1 + (spare as u64 * w / sum.max(1)) as usize)
        .collect();
    let mut assigned: usize = counts.iter().sum();
    let mut i = 0;
    while assigned < total && packages > 0 {
        counts[i % packages] += 1;
        assigned += 1;
        i += 1;
    }
    counts
}

/// Generates the catalog as a stream of JSON objects (one per line), in the layout
/// `opm render` produces: per package, the package, its channels, then its bundles.
pub fn generate(config: &SynthConfig) -> Vec<u8> {
    let mut rng = Rng(config.seed);
    let counts = bundle_counts(&mut rng, config.packages, config.bundles);
    let mut out = String::new();
    let mut bundle_no = 0usize;
    for (p, &count) in counts.iter().enumerate() {
        let pkg = package_name(p);
        let icon: String = (0..1_500)
            .map(|i| WORDS[i % WORDS.len()].chars().next().unwrap_or('A'))
            .collect();
        let _ = writeln!(
            out,
            r#"{{"schema":"olm.package","name":"{pkg}","defaultChannel":"stable","icon":{{"base64data":"{icon}","mediatype":"image/svg+xml"}},"description":"{pkg} for benchmarks"}}"#
        );
        let names: Vec<String> = (0..count)
            .map(|j| format!("{pkg}.v{}", version(j)))
            .collect();
        let mut entries = Vec::new();
        for j in 0..count {
            let mut e = format!(r#"{{"name":"{}""#, names[j]);
            if j > 0 {
                let _ = write!(e, r#","replaces":"{}""#, names[j - 1]);
            }
            if j % 5 == 4 {
                let _ = write!(
                    e,
                    r#","skipRange":">={} <{}""#,
                    version(j.saturating_sub(4)),
                    version(j)
                );
            }
            if j + 1 == count && rng.below(4) == 0 {
                // A long skips list of pruned bundles, as real catalogs carry.
                let n = 1 + rng.below(config.max_skips);
                let skips: Vec<String> = (0..n).map(|k| format!(r#""{pkg}.v0.{k}.0""#)).collect();
                let _ = write!(e, r#","skips":[{}]"#, skips.join(","));
            }
            e.push('}');
            entries.push(e);
        }
        let head = (p < config.new_heads).then(|| {
            format!(
                r#"{{"name":"{pkg}.v99.0.0","replaces":"{}"}}"#,
                names.last().map(String::as_str).unwrap_or_default()
            )
        });
        let stable: Vec<String> = entries.iter().cloned().chain(head.clone()).collect();
        let _ = writeln!(
            out,
            r#"{{"schema":"olm.channel","package":"{pkg}","name":"stable","entries":[{}]}}"#,
            stable.join(",")
        );
        let tail = entries.len().saturating_sub(3);
        let fast: Vec<String> = entries[tail..]
            .iter()
            .enumerate()
            .map(|(k, e)| {
                if k == 0 {
                    e.split(r#","replaces""#)
                        .next()
                        .unwrap_or(e)
                        .trim_end_matches('}')
                        .to_owned()
                        + "}"
                } else {
                    e.clone()
                }
            })
            .chain(head.clone())
            .collect();
        let _ = writeln!(
            out,
            r#"{{"schema":"olm.channel","package":"{pkg}","name":"fast","entries":[{}]}}"#,
            fast.join(",")
        );
        for (j, name) in names.iter().enumerate() {
            bundle_no += 1;
            let v = version(j);
            let mut props = vec![
                format!(
                    r#"{{"type":"olm.package","value":{{"packageName":"{pkg}","version":"{v}"}}}}"#
                ),
                format!(
                    r#"{{"type":"olm.gvk","value":{{"group":"{pkg}.example.com","kind":"Widget","version":"v1"}}}}"#
                ),
                format!(
                    r#"{{"type":"olm.gvk","value":{{"group":"{pkg}.example.com","kind":"Gadget","version":"v1alpha1"}}}}"#
                ),
            ];
            if p > 0 && bundle_no.is_multiple_of(config.dependency_every.max(1)) {
                let dep = package_name(rng.below(p));
                props.push(format!(r#"{{"type":"olm.package.required","value":{{"packageName":"{dep}","versionRange":">=1.0.0"}}}}"#));
                if rng.below(2) == 0 {
                    props.push(format!(r#"{{"type":"olm.gvk.required","value":{{"group":"{dep}.example.com","kind":"Widget","version":"v1"}}}}"#));
                }
            }
            let mut description = String::with_capacity(config.description_bytes);
            while description.len() < config.description_bytes {
                description.push_str(WORDS[rng.below(WORDS.len())]);
                description.push(' ');
            }
            props.push(format!(
                r#"{{"type":"olm.csv.metadata","value":{{"displayName":"{pkg}","description":"{}","capabilities":"Full Lifecycle","keywords":["bench","synthetic"],"maturity":"stable","minKubeVersion":"1.25.0","provider":{{"name":"Example"}}}}}}"#,
                description.trim_end()
            ));
            let _ = writeln!(
                out,
                r#"{{"schema":"olm.bundle","package":"{pkg}","name":"{name}","image":"quay.io/example/{pkg}-bundle@sha256:{:064x}","properties":[{}],"relatedImages":[{{"name":"operator","image":"quay.io/example/{pkg}@sha256:{:064x}"}},{{"name":"","image":"quay.io/example/{pkg}-bundle@sha256:{:064x}"}}]}}"#,
                bundle_no,
                props.join(","),
                bundle_no * 7,
                bundle_no
            );
        }
        if head.is_some() {
            let _ = writeln!(
                out,
                r#"{{"schema":"olm.bundle","package":"{pkg}","name":"{pkg}.v99.0.0","image":"example.com/{pkg}:v99.0.0","properties":[{{"type":"olm.package","value":{{"packageName":"{pkg}","version":"99.0.0"}}}},{{"type":"olm.gvk","value":{{"group":"{pkg}.example.com","kind":"Widget","version":"v1"}}}}]}}"#
            );
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_synthetic_catalog_is_valid() {
        let config = SynthConfig {
            packages: 12,
            bundles: 120,
            description_bytes: 200,
            ..Default::default()
        };
        let bytes = generate(&config);
        let fbc = crate::fbc::load_files([("synth.json", &bytes)]).unwrap();
        assert_eq!(fbc.packages.len(), 12);
        assert_eq!(fbc.bundles.len(), 120);
        let problems = crate::fbc::validate::validate(&fbc);
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(
            fbc.bundles
                .iter()
                .any(|b| b.required_packages().next().is_some())
        );
    }

    #[test]
    fn new_heads_add_one_valid_release_and_change_nothing_else() {
        let config = SynthConfig {
            packages: 12,
            bundles: 120,
            description_bytes: 200,
            ..Default::default()
        };
        let before = crate::fbc::load_files([("a.json", generate(&config))]).unwrap();
        let after = crate::fbc::load_files([(
            "b.json",
            generate(&SynthConfig {
                new_heads: 3,
                ..config
            }),
        )])
        .unwrap();
        assert!(crate::fbc::validate::validate(&after).is_empty());
        assert_eq!(after.bundles.len(), 123);
        let new: Vec<&str> = after
            .bundles
            .iter()
            .filter(|b| b.name.ends_with(".v99.0.0"))
            .map(|b| b.package.as_str())
            .collect();
        assert_eq!(new, [package_name(0), package_name(1), package_name(2)]);
        let old: Vec<&String> = after
            .bundles
            .iter()
            .filter(|b| !b.name.ends_with(".v99.0.0"))
            .map(|b| &b.name)
            .collect();
        assert_eq!(
            old,
            before.bundles.iter().map(|b| &b.name).collect::<Vec<_>>()
        );
    }
}
