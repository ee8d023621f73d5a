//! The `olm.catalogImageTemplate` language: literal text with variables in braces.
//!
//! * `{kube_major_version}`, `{kube_minor_version}`, `{kube_patch_version}`: the API server's
//!   version.
//! * `{group:G,version:V,kind:K,name:N,namespace:NS,jsonpath:EXPR}`: a field of another
//!   object (`group` is empty or absent for the core group; `namespace` is absent for
//!   cluster-scoped kinds).
//! * `{jsonpath:EXPR}`: a field of the annotated object itself.
//!
//! `EXPR` may be written `spec.foo`, `.spec.foo`, `{.spec.foo}` or `$.spec.foo`; it is kept
//! as written and evaluated as `$.spec.foo`. Errors name the column (1-based, in characters)
//! where the problem is, so that a long template can be fixed without guessing.

use std::fmt;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// Literal text and variables, in order.
    pub parts: Vec<Part>,
}

/// A piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text copied as it is.
    Literal(String),
    /// A version number of the API server.
    Kube(KubeVar),
    /// A field of an object.
    Object(ObjectVar),
}

/// The version variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KubeVar {
    /// `kube_major_version`.
    Major,
    /// `kube_minor_version`.
    Minor,
    /// `kube_patch_version`.
    Patch,
}

impl KubeVar {
    /// The variable's name.
    pub fn name(self) -> &'static str {
        match self {
            KubeVar::Major => "kube_major_version",
            KubeVar::Minor => "kube_minor_version",
            KubeVar::Patch => "kube_patch_version",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [KubeVar::Major, KubeVar::Minor, KubeVar::Patch]
            .into_iter()
            .find(|v| v.name() == name)
    }
}

/// An object variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVar {
    /// Whose field: the annotated object, or another one.
    pub target: Target,
    /// The JSONPath as written.
    pub jsonpath: String,
}

impl ObjectVar {
    /// The JSONPath in the form jsonpath-rust evaluates (`$.spec.foo`).
    pub fn query(&self) -> String {
        normalize_jsonpath(&self.jsonpath)
    }
}

/// The object a variable reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The annotated object itself.
    Itself,
    /// Another object.
    Other(ObjectRef),
}

/// Another object, by kind and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace; `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gv = if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        match &self.namespace {
            Some(ns) => write!(f, "{} {gv} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {gv} {}", self.kind, self.name),
        }
    }
}

/// Why a template does not parse: what, and at which column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {kind}")]
pub struct ParseError {
    /// 1-based, in characters.
    pub column: usize,
    /// What is wrong.
    pub kind: ParseErrorKind,
}

/// What is wrong with a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    /// A `{` without its `}`.
    #[error("'{{' is never closed")]
    Unclosed,
    /// A `}` without its `{`.
    #[error("'}}' closes nothing")]
    UnexpectedClose,
    /// A name that is not a variable.
    #[error(
        "unknown variable {0:?}; the variables are kube_major_version, kube_minor_version, kube_patch_version and {{group:…,version:…,kind:…,name:…,namespace:…,jsonpath:…}}"
    )]
    UnknownVariable(String),
    /// A `key:value` pair without its `:`.
    #[error("{0:?} is not key:value")]
    NotAPair(String),
    /// A key an object variable does not have.
    #[error("unknown key {0:?}; the keys are group, version, kind, name, namespace and jsonpath")]
    UnknownKey(String),
    /// A key given twice.
    #[error("key {0:?} is given twice")]
    RepeatedKey(String),
    /// A required key is missing.
    #[error(
        "the object variable has no {0:?}; it needs version, kind, name and jsonpath (group and namespace are optional), or jsonpath alone for the annotated object"
    )]
    MissingKey(&'static str),
    /// A key with an empty value.
    #[error("key {0:?} has an empty value")]
    EmptyValue(String),
    /// A value that cannot be what its key names (it would be pasted into a request path).
    #[error("{key} {value:?} is not {rule}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What it must be.
        rule: &'static str,
    },
    /// The JSONPath does not parse.
    #[error("jsonpath {path:?} does not parse: {why}")]
    BadJsonPath {
        /// As written.
        path: String,
        /// The parser's words.
        why: String,
    },
}

const KEYS: [&str; 6] = ["group", "version", "kind", "name", "namespace", "jsonpath"];

/// Parses a template.
pub fn parse(text: &str) -> Result<Template, ParseError> {
    // A YAML block scalar (`|`) ends the annotation with a newline; no reference has one.
    let text = text.trim_end();
    let chars: Vec<char> = text.chars().collect();
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '{' => {
                let close = matching(&chars, i).ok_or(ParseError {
                    column: i + 1,
                    kind: ParseErrorKind::Unclosed,
                })?;
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                let inner: String = chars[i + 1..close].iter().collect();
                parts.push(variable(&inner, i + 2)?);
                i = close + 1;
            }
            '}' => {
                return Err(ParseError {
                    column: i + 1,
                    kind: ParseErrorKind::UnexpectedClose,
                });
            }
            c => {
                literal.push(c);
                i += 1;
            }
        }
    }
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    Ok(Template { parts })
}

/// The index of the `}` that closes the `{` at `open`, counting nested braces.
fn matching(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The variable whose text (between the braces) starts at `column`.
fn variable(inner: &str, column: usize) -> Result<Part, ParseError> {
    let at = |offset: usize, kind| ParseError {
        column: column + offset,
        kind,
    };
    if let Some(v) = KubeVar::from_name(inner.trim()) {
        return Ok(Part::Kube(v));
    }
    if !inner.contains(':') {
        return Err(at(0, ParseErrorKind::UnknownVariable(inner.to_owned())));
    }
    let mut values: [Option<String>; 6] = Default::default();
    for (offset, pair) in split_pairs(inner) {
        let Some((key, value)) = pair.split_once(':') else {
            return Err(at(offset, ParseErrorKind::NotAPair(pair.to_owned())));
        };
        let key_trimmed = key.trim();
        let Some(slot) = KEYS.iter().position(|k| *k == key_trimmed) else {
            return Err(at(
                offset,
                ParseErrorKind::UnknownKey(key_trimmed.to_owned()),
            ));
        };
        if values[slot].is_some() {
            return Err(at(
                offset,
                ParseErrorKind::RepeatedKey(key_trimmed.to_owned()),
            ));
        }
        let value = value.trim();
        // An empty group is the core group; any other key needs a value.
        if value.is_empty() && key_trimmed != "group" {
            return Err(at(
                offset,
                ParseErrorKind::EmptyValue(key_trimmed.to_owned()),
            ));
        }
        if key_trimmed == "jsonpath"
            && let Err(why) = jsonpath_rust::parser::parse_json_path(&normalize_jsonpath(value))
        {
            let value_offset = offset + key.chars().count() + 1;
            return Err(at(
                value_offset,
                ParseErrorKind::BadJsonPath {
                    path: value.to_owned(),
                    why: why.to_string(),
                },
            ));
        }
        if let Some(rule) = invalid(key_trimmed, value) {
            let value_offset = offset + key.chars().count() + 1;
            return Err(at(
                value_offset,
                ParseErrorKind::InvalidValue {
                    key: key_trimmed.to_owned(),
                    value: value.to_owned(),
                    rule,
                },
            ));
        }
        values[slot] = Some(value.to_owned());
    }
    let [group, version, kind, name, namespace, jsonpath] = values;
    let jsonpath = jsonpath.ok_or(at(0, ParseErrorKind::MissingKey("jsonpath")))?;
    if group.is_none()
        && version.is_none()
        && kind.is_none()
        && name.is_none()
        && namespace.is_none()
    {
        return Ok(Part::Object(ObjectVar {
            target: Target::Itself,
            jsonpath,
        }));
    }
    let required = |value: Option<String>, key: &'static str| {
        value.ok_or(at(0, ParseErrorKind::MissingKey(key)))
    };
    Ok(Part::Object(ObjectVar {
        target: Target::Other(ObjectRef {
            version: required(version, "version")?,
            kind: required(kind, "kind")?,
            name: required(name, "name")?,
            group: group.unwrap_or_default(),
            namespace,
        }),
        jsonpath,
    }))
}

/// What `value` must be and is not, for `key`. Names and namespaces end up in request paths:
/// only the characters Kubernetes allows in them pass, so a template cannot reach another
/// path (`kube-system/secrets/x`, `x/status`).
fn invalid(key: &str, value: &str) -> Option<&'static str> {
    let dns_label = |v: &str| {
        !v.is_empty()
            && v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !v.starts_with('-')
            && !v.ends_with('-')
    };
    let dns_subdomain = |v: &str| v.len() <= 253 && v.split('.').all(dns_label);
    match key {
        "group" if !value.is_empty() && !dns_subdomain(value) => {
            Some("an API group (a DNS subdomain, such as example.com)")
        }
        "version"
            if !(value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())) =>
        {
            Some("an API version (lower-case letters and digits, such as v1 or v1beta1)")
        }
        "kind"
            if !(value.bytes().all(|b| b.is_ascii_alphanumeric())
                && value
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_alphabetic())) =>
        {
            Some("a kind (letters and digits, such as ConfigMap)")
        }
        "name" if !dns_subdomain(value) => {
            Some("an object name (a DNS subdomain: lower-case letters, digits, '-' and '.')")
        }
        "namespace" if !dns_label(value) => {
            Some("a namespace (a DNS label: lower-case letters, digits and '-')")
        }
        _ => None,
    }
}

/// The `key:value` pairs of an object variable with their offsets (in characters), split on
/// the commas outside brackets, braces, parentheses and quotes (a JSONPath may hold any).
fn split_pairs(inner: &str) -> Vec<(usize, &str)> {
    let mut pairs = Vec::new();
    let (mut depth, mut quote) = (0i32, None::<char>);
    let (mut start_byte, mut start_char) = (0usize, 0usize);
    for (char_index, (byte, c)) in inner.char_indices().enumerate() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[' | '{' | '(') => depth += 1,
            (None, ']' | '}' | ')') => depth -= 1,
            (None, ',') if depth == 0 => {
                pairs.push((start_char, &inner[start_byte..byte]));
                start_byte = byte + 1;
                start_char = char_index + 1;
            }
            _ => {}
        }
    }
    pairs.push((start_char, &inner[start_byte..]));
    pairs
}

/// `spec.foo`, `.spec.foo`, `{.spec.foo}` and `$.spec.foo` all as `$.spec.foo`.
pub fn normalize_jsonpath(written: &str) -> String {
    let mut path = written.trim();
    if let Some(inner) = path.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
        path = inner.trim();
    }
    if path.starts_with('$') {
        path.to_owned()
    } else if path.starts_with('.') || path.starts_with('[') {
        format!("${path}")
    } else {
        format!("$.{path}")
    }
}

impl fmt::Display for Template {
    /// The canonical text: parses back to the same template.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Literal(text) => f.write_str(text)?,
                Part::Kube(v) => write!(f, "{{{}}}", v.name())?,
                Part::Object(o) => match &o.target {
                    Target::Itself => write!(f, "{{jsonpath:{}}}", o.jsonpath)?,
                    Target::Other(r) => {
                        write!(
                            f,
                            "{{group:{},version:{},kind:{},name:{},",
                            r.group, r.version, r.kind, r.name
                        )?;
                        if let Some(ns) = &r.namespace {
                            write!(f, "namespace:{ns},")?;
                        }
                        write!(f, "jsonpath:{}}}", o.jsonpath)?;
                    }
                },
            }
        }
        Ok(())
    }
}

impl Template {
    /// The other objects the template reads, each once.
    pub fn objects(&self) -> Vec<&ObjectRef> {
        let mut refs: Vec<&ObjectRef> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Object(ObjectVar {
                    target: Target::Other(r),
                    ..
                }) => Some(r),
                _ => None,
            })
            .collect();
        refs.sort();
        refs.dedup();
        refs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> (usize, ParseErrorKind) {
        let e = parse(text).unwrap_err();
        (e.column, e.kind)
    }

    #[test]
    fn version_variables_and_literals() {
        let t = parse("registry.example.com/catalog:v{kube_major_version}.{kube_minor_version}")
            .unwrap();
        assert_eq!(
            t.parts,
            [
                Part::Literal("registry.example.com/catalog:v".into()),
                Part::Kube(KubeVar::Major),
                Part::Literal(".".into()),
                Part::Kube(KubeVar::Minor),
            ]
        );
        assert_eq!(parse("").unwrap().parts, []);
    }

    #[test]
    fn object_variables_with_every_jsonpath_spelling() {
        for written in [
            "spec.foo.bar",
            ".spec.foo.bar",
            "{.spec.foo.bar}",
            "$.spec.foo.bar",
        ] {
            let text = format!(
                "r.io/c:{{group:example.com,version:v1,kind:Sample,name:my-sample,namespace:ns,jsonpath:{written}}}"
            );
            let t = parse(&text).unwrap();
            let Part::Object(o) = &t.parts[1] else {
                panic!("{t:?}")
            };
            assert_eq!(o.query(), "$.spec.foo.bar", "{written}");
            assert_eq!(o.jsonpath, written);
            assert_eq!(
                o.target,
                Target::Other(ObjectRef {
                    group: "example.com".into(),
                    version: "v1".into(),
                    kind: "Sample".into(),
                    name: "my-sample".into(),
                    namespace: Some("ns".into()),
                })
            );
        }
    }

    #[test]
    fn the_core_group_and_cluster_scope_and_the_object_itself() {
        let t = parse("{version:v1,kind:ConfigMap,name:c,namespace:n,jsonpath:data.tag}").unwrap();
        let Part::Object(o) = &t.parts[0] else {
            panic!()
        };
        let Target::Other(r) = &o.target else {
            panic!()
        };
        assert_eq!(
            (r.group.as_str(), r.to_string().as_str()),
            ("", "ConfigMap v1 n/c")
        );
        let t = parse("{group:,version:v1,kind:Namespace,name:n,jsonpath:metadata.uid}").unwrap();
        let Part::Object(o) = &t.parts[0] else {
            panic!()
        };
        let Target::Other(r) = &o.target else {
            panic!()
        };
        assert_eq!(r.namespace, None);
        let t = parse("r/c:{jsonpath:metadata.labels.tag}").unwrap();
        assert_eq!(
            t.parts[1],
            Part::Object(ObjectVar {
                target: Target::Itself,
                jsonpath: "metadata.labels.tag".into()
            })
        );
    }

    #[test]
    fn errors_name_the_column() {
        assert_eq!(err("a{kube_major_version"), (2, ParseErrorKind::Unclosed));
        assert_eq!(err("ab}"), (3, ParseErrorKind::UnexpectedClose));
        assert_eq!(
            err("r:{kube_minor}"),
            (4, ParseErrorKind::UnknownVariable("kube_minor".into()))
        );
        assert_eq!(
            err("{}"),
            (2, ParseErrorKind::UnknownVariable(String::new()))
        );
        assert_eq!(
            err("x{version:v1,kind:K,nam:n,jsonpath:a}"),
            (21, ParseErrorKind::UnknownKey("nam".into()))
        );
        assert_eq!(
            err("{version:v1,kind:K,kind:L,name:n,jsonpath:a}"),
            (20, ParseErrorKind::RepeatedKey("kind".into()))
        );
        assert_eq!(
            err("{version:v1,kind:K,jsonpath:a}"),
            (2, ParseErrorKind::MissingKey("name"))
        );
        assert_eq!(
            err("{version:v1,kind:K,name:n}"),
            (2, ParseErrorKind::MissingKey("jsonpath"))
        );
        assert_eq!(
            err("{version:v1,kind,name:n,jsonpath:a}"),
            (13, ParseErrorKind::NotAPair("kind".into()))
        );
        assert_eq!(
            err("{version:,kind:K,name:n,jsonpath:a}"),
            (2, ParseErrorKind::EmptyValue("version".into()))
        );
        let (column, kind) = err("é{jsonpath:spec[}");
        assert_eq!(column, 12, "{kind}");
        assert!(matches!(kind, ParseErrorKind::BadJsonPath { .. }), "{kind}");
        // Messages say it in words, with the column.
        let e = parse("r:{kube_minor}").unwrap_err().to_string();
        assert!(
            e.starts_with("column 4: unknown variable \"kube_minor\""),
            "{e}"
        );
    }

    #[test]
    fn names_and_namespaces_cannot_reach_other_paths() {
        for (text, key) in [
            (
                "{version:v1,kind:Namespace,name:kube-system/configmaps/x,jsonpath:a}",
                "name",
            ),
            (
                "{version:v1,kind:ConfigMap,name:n,namespace:kube-system/secrets/s?,jsonpath:a}",
                "namespace",
            ),
            (
                "{version:v1,kind:ConfigMap,name:x%2Fstatus,jsonpath:a}",
                "name",
            ),
            ("{version:v1,kind:Config-Map,name:n,jsonpath:a}", "kind"),
            (
                "{group:Example.com,version:v1,kind:K,name:n,jsonpath:a}",
                "group",
            ),
            ("{version:V1,kind:K,name:n,jsonpath:a}", "version"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(
                matches!(&e.kind, ParseErrorKind::InvalidValue { key: k, .. } if k == key),
                "{text}: {e}"
            );
        }
        assert!(parse("{group:apps.example.com,version:v1beta1,kind:Sample,name:my.sample-1,namespace:ns-1,jsonpath:a}").is_ok());
        // A trailing newline (YAML block scalar) is not part of the template.
        assert_eq!(parse("r/c:v1\n").unwrap().to_string(), "r/c:v1");
    }

    /// The examples of docs/catalog-switcher.md, kept true.
    #[test]
    fn the_documented_errors() {
        for (text, column, starts) in [
            ("r/c:{kube_minor}", 6, "unknown variable \"kube_minor\""),
            ("r/c:{kube_major_version", 5, "'{' is never closed"),
            ("r/c:v1}", 7, "'}' closes nothing"),
            (
                "{version:v1,kind:K,nam:n,jsonpath:a}",
                20,
                "unknown key \"nam\"",
            ),
            (
                "{version:v1,kind:K,kind:L,name:n,jsonpath:a}",
                20,
                "key \"kind\" is given twice",
            ),
            (
                "{version:v1,kind:K,jsonpath:a}",
                2,
                "the object variable has no \"name\"",
            ),
            ("{jsonpath:spec[}", 11, "jsonpath \"spec[\" does not parse"),
            (
                "{version:v1,kind:ConfigMap,name:x/status,jsonpath:a}",
                33,
                "name \"x/status\" is not an object name",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.column, column, "{text}: {e}");
            assert!(e.kind.to_string().starts_with(starts), "{text}: {e}");
        }
    }

    #[test]
    fn commas_and_braces_inside_a_jsonpath_do_not_split_it() {
        let t = parse("{version:v1,kind:K,name:n,jsonpath:{.spec.items[?(@.name=='a,b')].tag}}")
            .unwrap();
        let Part::Object(o) = &t.parts[0] else {
            panic!()
        };
        assert_eq!(o.jsonpath, "{.spec.items[?(@.name=='a,b')].tag}");
    }

    #[test]
    fn the_canonical_text_parses_back() {
        for text in [
            "r.io/c:v{kube_major_version}.{kube_minor_version}.{kube_patch_version}",
            "{ version : v1 , kind:K,name:n,group:g.io,namespace:ns,jsonpath:{.a.b}}-x",
            "r/c:{jsonpath:$.metadata.name}",
        ] {
            let t = parse(text).unwrap();
            assert_eq!(parse(&t.to_string()).unwrap(), t, "{text} -> {t}");
        }
    }

    #[test]
    fn objects_are_listed_once() {
        let t = parse(
            "{version:v1,kind:C,name:a,jsonpath:x}{version:v1,kind:C,name:a,jsonpath:y}{jsonpath:z}",
        )
        .unwrap();
        assert_eq!(t.objects().len(), 1);
    }
}
