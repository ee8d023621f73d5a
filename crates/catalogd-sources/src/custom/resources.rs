//! The resources of a generator container: what its spec sets, and for every resource it
//! leaves open (CPU, memory, ephemeral storage) the admin's defaults, so that a Catalog's
//! author cannot run a container without limits in catalogd's namespace.
//!
//! Per resource: a limit in the spec is kept (with its request, if any); a request without a
//! limit gets that request as its limit (a limit below the request would be refused by the API
//! server, and comparing quantities is not needed); neither gets the default request and limit.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The resources that get defaults.
pub const DEFAULTED: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// The admin's defaults for generator containers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Defaults {
    /// Requests, by resource name.
    pub requests: BTreeMap<String, Quantity>,
    /// Limits, by resource name.
    pub limits: BTreeMap<String, Quantity>,
    /// The most a spec may ask for, request or limit, by resource name (none: no ceiling).
    pub maximum: BTreeMap<String, Quantity>,
}

/// The default ceiling (catalogd's `--generator-max-resources` and the chart's value).
pub const DEFAULT_MAXIMUM: &str = "cpu=2,memory=2Gi,ephemeral-storage=2Gi";

/// The default requests (catalogd's flag and the chart's value).
pub const DEFAULT_REQUESTS: &str = "cpu=100m,memory=128Mi,ephemeral-storage=64Mi";
/// The default limits.
pub const DEFAULT_LIMITS: &str = "cpu=1,memory=1Gi,ephemeral-storage=1Gi";

impl Defaults {
    /// [`DEFAULT_REQUESTS`] and [`DEFAULT_LIMITS`].
    pub fn standard() -> Self {
        Self {
            requests: parse_list(DEFAULT_REQUESTS).unwrap_or_default(),
            limits: parse_list(DEFAULT_LIMITS).unwrap_or_default(),
            maximum: parse_list(DEFAULT_MAXIMUM).unwrap_or_default(),
        }
    }
}

/// Parses `cpu=1,memory=1Gi` (a flag's value) into quantities by resource.
pub fn parse_list(text: &str) -> Result<BTreeMap<String, Quantity>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not RESOURCE=QUANTITY"))?;
            let (name, value) = (name.trim(), value.trim());
            if !DEFAULTED.contains(&name) {
                return Err(format!("{name:?} is not one of {}", DEFAULTED.join(", ")));
            }
            let valid = !value.is_empty()
                && value.starts_with(|c: char| c.is_ascii_digit() || c == '.')
                && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
            if !valid {
                return Err(format!(
                    "{value:?} is not a quantity (such as 500m, 1, 256Mi)"
                ));
            }
            Ok((name.to_owned(), Quantity(value.to_owned())))
        })
        .collect()
}

/// What a spec asks beyond the admin's ceiling, in a sentence (the first such resource), or
/// `None`. A Catalog's author chooses the spec, and the generator runs in catalogd's namespace:
/// without a ceiling, a limit of a thousand CPUs would be taken as written. A quantity that
/// cannot be read is refused too.
pub fn beyond_ceiling(
    spec: Option<&ResourceRequirements>,
    maximum: &BTreeMap<String, Quantity>,
) -> Option<String> {
    let spec = spec?;
    for (kind, asked) in [("requests", &spec.requests), ("limits", &spec.limits)] {
        for (name, quantity) in asked.iter().flatten() {
            let Some(most) = maximum.get(name) else {
                continue;
            };
            let parsed = kube_quantity::ParsedQuantity::try_from(quantity);
            let bound = kube_quantity::ParsedQuantity::try_from(most);
            match (parsed, bound) {
                (Ok(q), Ok(m)) if q <= m => {}
                (Ok(_), Ok(_)) => {
                    return Some(format!(
                        "custom.resources.{kind}.{name} {:?} is more than the admin allows a generator, {:?} (--generator-max-resources)",
                        quantity.0, most.0
                    ));
                }
                _ => {
                    return Some(format!(
                        "custom.resources.{kind}.{name} {:?} is not a quantity",
                        quantity.0
                    ));
                }
            }
        }
    }
    None
}

/// The generator container's resources: `spec`'s, completed with `defaults`.
pub fn with_defaults(
    spec: Option<&ResourceRequirements>,
    defaults: &Defaults,
) -> ResourceRequirements {
    let mut out = spec.cloned().unwrap_or_default();
    let mut requests = out.requests.take().unwrap_or_default();
    let mut limits = out.limits.take().unwrap_or_default();
    for name in DEFAULTED {
        if limits.contains_key(name) {
            continue;
        }
        match requests.get(name) {
            Some(request) => {
                limits.insert(name.to_owned(), request.clone());
            }
            None => {
                if let Some(request) = defaults.requests.get(name) {
                    requests.insert(name.to_owned(), request.clone());
                }
                if let Some(limit) = defaults.limits.get(name) {
                    limits.insert(name.to_owned(), limit.clone());
                }
            }
        }
    }
    out.requests = (!requests.is_empty()).then_some(requests);
    out.limits = (!limits.is_empty()).then_some(limits);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect(),
        )
    }

    #[test]
    fn a_spec_without_resources_gets_the_defaults() {
        let r = with_defaults(None, &Defaults::standard());
        assert_eq!(
            r.limits,
            q(&[
                ("cpu", "1"),
                ("ephemeral-storage", "1Gi"),
                ("memory", "1Gi")
            ])
        );
        assert_eq!(
            r.requests,
            q(&[
                ("cpu", "100m"),
                ("ephemeral-storage", "64Mi"),
                ("memory", "128Mi")
            ])
        );
    }

    #[test]
    fn what_the_spec_sets_is_kept_and_a_lone_request_becomes_the_limit() {
        let spec = ResourceRequirements {
            requests: q(&[("memory", "2Gi"), ("nvidia.com/gpu", "1")]),
            limits: q(&[("cpu", "4")]),
            ..Default::default()
        };
        let r = with_defaults(Some(&spec), &Defaults::standard());
        let limits = r.limits.unwrap();
        assert_eq!(limits["cpu"], Quantity("4".into()), "the spec's limit");
        assert_eq!(
            limits["memory"],
            Quantity("2Gi".into()),
            "its request, not 1Gi below it"
        );
        assert_eq!(
            limits["ephemeral-storage"],
            Quantity("1Gi".into()),
            "the default"
        );
        let requests = r.requests.unwrap();
        assert!(
            !requests.contains_key("cpu"),
            "the API server defaults it to the limit"
        );
        assert_eq!(requests["nvidia.com/gpu"], Quantity("1".into()));
        assert_eq!(requests["ephemeral-storage"], Quantity("64Mi".into()));
    }

    #[test]
    fn flag_lists_parse_and_bad_ones_are_refused() {
        assert_eq!(
            parse_list("cpu=500m, memory=256Mi").unwrap(),
            q(&[("cpu", "500m"), ("memory", "256Mi")]).unwrap()
        );
        assert!(parse_list("").unwrap().is_empty());
        assert!(parse_list("gpu=1").is_err());
        assert!(parse_list("cpu").is_err());
        assert!(parse_list("memory=lots").is_err());
    }

    #[test]
    fn what_a_spec_asks_beyond_the_ceiling_is_named() {
        let maximum = Defaults::standard().maximum;
        let spec = |requests: &[(&str, &str)], limits: &[(&str, &str)]| ResourceRequirements {
            requests: q(requests),
            limits: q(limits),
            ..Default::default()
        };
        assert_eq!(beyond_ceiling(None, &maximum), None);
        let within = spec(&[("cpu", "1500m")], &[("cpu", "2"), ("memory", "2048Mi")]);
        assert_eq!(beyond_ceiling(Some(&within), &maximum), None);
        let greedy = spec(&[], &[("cpu", "1000"), ("memory", "1Gi")]);
        assert_eq!(
            beyond_ceiling(Some(&greedy), &maximum).as_deref(),
            Some(
                "custom.resources.limits.cpu \"1000\" is more than the admin allows a generator, \"2\" (--generator-max-resources)"
            )
        );
        let big_request = spec(&[("memory", "3G")], &[]);
        assert!(
            beyond_ceiling(Some(&big_request), &maximum)
                .is_some_and(|m| m.starts_with("custom.resources.requests.memory \"3G\""))
        );
        let nonsense = spec(&[], &[("ephemeral-storage", "lots")]);
        assert!(
            beyond_ceiling(Some(&nonsense), &maximum)
                .is_some_and(|m| m.ends_with("is not a quantity"))
        );
        // A resource the ceiling does not name is not bounded by it.
        let gpu = spec(&[], &[("nvidia.com/gpu", "8")]);
        assert_eq!(beyond_ceiling(Some(&gpu), &maximum), None);
    }
}
