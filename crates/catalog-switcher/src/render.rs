//! A template filled in, and what the switcher makes of it: the image reference to write, or
//! why there is none. Pure: the version and the objects' contents come in as arguments.

use std::str::FromStr;

use oci_spec::distribution::Reference;
use serde_json::Value;

use crate::template::{self, KubeVar, ObjectVar, Part, Target, Template};
use crate::version::KubeVersion;

/// Condition reason: every variable resolved and the result is an image reference.
pub const ALL_TEMPLATES_RESOLVED: &str = "AllTemplatesResolved";
/// Condition reason: the template has a problem (syntax, a missing value, not an image).
pub const UNABLE_TO_RESOLVE: &str = "UnableToResolve";
/// Condition reason: the template reads a resource that is not on the allowlist.
pub const NOT_ALLOWED: &str = "NotAllowed";
/// Condition reason: the template reads more objects than one template may
/// (`--max-objects-per-template`).
pub const TOO_MANY_OBJECTS: &str = "TooManyObjects";
/// Condition reason: watching what the template reads would take the switcher past the
/// objects it watches in all (`--max-watched-objects`).
pub const WATCH_LIMIT_REACHED: &str = "WatchLimitReached";

/// What looking up an object's content gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The object, as JSON.
    Found(Value),
    /// It is not there, or could not be read; why.
    Missing(String),
    /// The switcher may not read it; the message names the allowlist.
    NotAllowed(String),
}

/// The outcome of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The image reference to write.
    Resolved(String),
    /// No reference; the reason (`UnableToResolve` or `NotAllowed`) and the message.
    Unresolved {
        /// The condition reason.
        reason: &'static str,
        /// What to fix.
        message: String,
        /// The template filled as far as it could be (upstream's `ResolvedImage` message).
        partial: String,
    },
}

impl Outcome {
    /// The image to write, if any.
    pub fn image(&self) -> Option<&str> {
        match self {
            Outcome::Resolved(image) => Some(image),
            Outcome::Unresolved { .. } => None,
        }
    }
}

/// Fills the template `text` from `version` (when known) and the objects `lookup` returns.
pub fn resolve(
    text: &str,
    version: Option<&KubeVersion>,
    lookup: &mut dyn FnMut(&Target) -> Lookup,
) -> Outcome {
    let template = match template::parse(text) {
        Ok(t) => t,
        Err(e) => {
            return Outcome::Unresolved {
                reason: UNABLE_TO_RESOLVE,
                message: format!(
                    "cannot construct catalog image reference, because the template has improper syntax at {e}"
                ),
                partial: text.to_owned(),
            };
        }
    };
    fill(&template, version, lookup)
}

/// Fills a parsed template.
pub fn fill(
    template: &Template,
    version: Option<&KubeVersion>,
    lookup: &mut dyn FnMut(&Target) -> Lookup,
) -> Outcome {
    let mut filled = String::new();
    let mut problems: Vec<String> = Vec::new();
    let mut not_allowed: Vec<String> = Vec::new();
    for part in &template.parts {
        match part {
            Part::Literal(text) => filled.push_str(text),
            Part::Kube(var) => match version.and_then(|v| v.get(*var)) {
                Some(value) => filled.push_str(value),
                None => {
                    problems.push(format!(
                        "{{{}}}: {}",
                        var.name(),
                        unknown_version(*var, version)
                    ));
                    filled.push_str(&format!("{{{}}}", var.name()));
                }
            },
            Part::Object(var) => match value_of(var, lookup) {
                Ok(value) => filled.push_str(&value),
                Err(Problem::NotAllowed(why)) => {
                    not_allowed.push(why);
                    filled.push_str(&written(var));
                }
                Err(Problem::Unresolved(why)) => {
                    problems.push(format!("{}: {why}", written(var)));
                    filled.push_str(&written(var));
                }
            },
        }
    }
    if !not_allowed.is_empty() {
        return Outcome::Unresolved {
            reason: NOT_ALLOWED,
            message: format!(
                "cannot construct catalog image reference, because the template reads what the catalog-switcher may not: {}",
                not_allowed.join("; ")
            ),
            partial: filled,
        };
    }
    if !problems.is_empty() {
        return Outcome::Unresolved {
            reason: UNABLE_TO_RESOLVE,
            message: format!(
                "cannot construct catalog image reference, because variable(s) could not be resolved: {}",
                problems.join("; ")
            ),
            partial: filled,
        };
    }
    match Reference::from_str(&filled) {
        Ok(_) => Outcome::Resolved(filled),
        Err(e) => Outcome::Unresolved {
            reason: UNABLE_TO_RESOLVE,
            // The result is in `partial` (the ResolvedImage condition), not in the message:
            // messages also go into events, which more people may read than the object.
            message: format!(
                "cannot construct catalog image reference, because the result is not an image reference ({e}); the ResolvedImage condition shows it"
            ),
            partial: filled,
        },
    }
}

fn unknown_version(var: KubeVar, version: Option<&KubeVersion>) -> String {
    match version {
        None => "the API server's version is not known yet".to_owned(),
        Some(v) => format!(
            "the API server's version {:?} has no {} number",
            v.git_version,
            match var {
                KubeVar::Major => "major",
                KubeVar::Minor => "minor",
                KubeVar::Patch => "patch",
            }
        ),
    }
}

enum Problem {
    NotAllowed(String),
    Unresolved(String),
}

/// The variable as written in the template (for messages and partial results).
fn written(var: &ObjectVar) -> String {
    Template {
        parts: vec![Part::Object(var.clone())],
    }
    .to_string()
}

/// The scalar an object variable stands for.
fn value_of(var: &ObjectVar, lookup: &mut dyn FnMut(&Target) -> Lookup) -> Result<String, Problem> {
    let object = match lookup(&var.target) {
        Lookup::Found(object) => object,
        Lookup::Missing(why) => return Err(Problem::Unresolved(why)),
        Lookup::NotAllowed(why) => return Err(Problem::NotAllowed(why)),
    };
    let query = var.query();
    let found = jsonpath_rust::JsonPath::query(&object, &query)
        .map_err(|e| Problem::Unresolved(format!("jsonpath {query}: {e}")))?;
    match found.as_slice() {
        [] => Err(Problem::Unresolved(format!("{query} matches nothing"))),
        [one] => scalar(one).ok_or_else(|| {
            Problem::Unresolved(format!(
                "{query} is {}, not a string, number or boolean",
                kind_of(one)
            ))
        }),
        many => Err(Problem::Unresolved(format!(
            "{query} matches {} values, not one",
            many.len()
        ))),
    }
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
        _ => "a scalar",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn version() -> KubeVersion {
        KubeVersion {
            major: "1".into(),
            minor: "36".into(),
            patch: Some("3".into()),
            git_version: "v1.36.3".into(),
        }
    }

    fn none(_: &Target) -> Lookup {
        Lookup::Missing("no objects here".into())
    }

    #[test]
    fn version_variables_resolve_to_an_image() {
        let out = resolve(
            "r.io/catalog:v{kube_major_version}.{kube_minor_version}.{kube_patch_version}",
            Some(&version()),
            &mut none,
        );
        assert_eq!(out, Outcome::Resolved("r.io/catalog:v1.36.3".into()));
    }

    #[test]
    fn an_unknown_version_leaves_the_variable_and_says_why() {
        let out = resolve("r.io/c:v{kube_minor_version}", None, &mut none);
        let Outcome::Unresolved {
            reason,
            message,
            partial,
        } = out
        else {
            panic!()
        };
        assert_eq!(reason, UNABLE_TO_RESOLVE);
        assert!(
            message.contains("{kube_minor_version}: the API server's version is not known yet"),
            "{message}"
        );
        assert_eq!(partial, "r.io/c:v{kube_minor_version}");
    }

    #[test]
    fn object_fields_are_read_as_scalars() {
        let cm = json!({"data": {"tag": "v2", "n": 7, "list": ["a"], "obj": {}}});
        let mut lookup = |t: &Target| match t {
            Target::Other(r) if r.name == "cm" => Lookup::Found(cm.clone()),
            Target::Itself => Lookup::Found(json!({"metadata": {"labels": {"env": "prod"}}})),
            _ => Lookup::Missing("ConfigMap v1 ns/other not found".into()),
        };
        let ok = resolve(
            "r.io/c-{jsonpath:metadata.labels.env}:{version:v1,kind:ConfigMap,name:cm,namespace:ns,jsonpath:data.tag}.{version:v1,kind:ConfigMap,name:cm,namespace:ns,jsonpath:data.n}",
            None,
            &mut lookup,
        );
        assert_eq!(ok, Outcome::Resolved("r.io/c-prod:v2.7".into()));
        for (path, why) in [
            ("data.list", "is a list"),
            ("data.obj", "is an object"),
            ("data.none", "matches nothing"),
            ("data.*", "matches 4 values"),
        ] {
            let text = format!(
                "r.io/c:{{version:v1,kind:ConfigMap,name:cm,namespace:ns,jsonpath:{path}}}"
            );
            let out = resolve(&text, None, &mut lookup);
            let Outcome::Unresolved { message, .. } = &out else {
                panic!("{out:?}")
            };
            assert!(message.contains(why), "{path}: {message}");
        }
        let out = resolve(
            "r.io/c:{version:v1,kind:ConfigMap,name:other,namespace:ns,jsonpath:data.tag}",
            None,
            &mut lookup,
        );
        let Outcome::Unresolved { message, .. } = &out else {
            panic!()
        };
        assert!(
            message.contains("ConfigMap v1 ns/other not found"),
            "{message}"
        );
    }

    #[test]
    fn a_result_that_is_not_an_image_reference_is_refused() {
        let mut lookup = |_: &Target| Lookup::Found(json!({"tag": "has spaces"}));
        let out = resolve("r.io/c:{jsonpath:tag}", None, &mut lookup);
        let Outcome::Unresolved {
            reason, message, ..
        } = out
        else {
            panic!()
        };
        assert_eq!(reason, UNABLE_TO_RESOLVE);
        assert!(message.contains("is not an image reference"), "{message}");
    }

    #[test]
    fn not_allowed_wins_over_other_problems() {
        let mut lookup = |_: &Target| {
            Lookup::NotAllowed("Secret v1 ns/s is not on the allowlist (v1/configmaps)".into())
        };
        let out = resolve(
            "r.io/c:{kube_patch_version}-{version:v1,kind:Secret,name:s,namespace:ns,jsonpath:data.x}",
            None,
            &mut lookup,
        );
        let Outcome::Unresolved {
            reason, message, ..
        } = out
        else {
            panic!()
        };
        assert_eq!(reason, NOT_ALLOWED);
        assert!(message.contains("allowlist (v1/configmaps)"), "{message}");
    }

    #[test]
    fn syntax_errors_name_the_column() {
        let out = resolve("r.io/c:{kube_minor}", Some(&version()), &mut none);
        let Outcome::Unresolved {
            reason, message, ..
        } = out
        else {
            panic!()
        };
        assert_eq!(reason, UNABLE_TO_RESOLVE);
        assert!(
            message.contains("improper syntax at column 9: unknown variable"),
            "{message}"
        );
    }
}
