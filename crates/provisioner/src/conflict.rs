//! Objects that block an install: one that exists without our marks, or that another
//! BundleDeployment owns. The provisioner never adopts either (it only takes back a CRD or
//! Namespace it kept itself, see `marks::ownership_of`); the install continues once the object
//! is gone (or leaves the bundle).

use crate::marks::Ownership;
use crate::object::Key;

/// An object of the bundle that exists and is not ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The object.
    pub key: Key,
    /// Whose it is.
    pub owner: Ownership,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.owner {
            Ownership::Other(bd) => write!(
                f,
                "{} already exists and belongs to BundleDeployment {bd:?}; an object has one owner",
                self.key
            ),
            Ownership::Unowned { managed_by } => {
                write!(
                    f,
                    "{} already exists and no BundleDeployment owns it",
                    self.key
                )?;
                if let Some(manager) = managed_by {
                    write!(f, " (it is managed by {manager})")?;
                }
                write!(
                    f,
                    "; objects are never adopted: delete it, or leave it out of the bundle"
                )
            }
            Ownership::Ours => write!(f, "{} is ours", self.key),
        }
    }
}

/// The conflicts among `found`: the bundle's objects that exist in the cluster, with whose
/// each is.
pub fn conflicts(found: impl IntoIterator<Item = (Key, Ownership)>) -> Vec<Conflict> {
    let mut conflicts: Vec<Conflict> = found
        .into_iter()
        .filter(|(_, owner)| *owner != Ownership::Ours)
        .map(|(key, owner)| Conflict { key, owner })
        .collect();
    conflicts.sort_by(|a, b| a.key.cmp(&b.key));
    conflicts
}

/// One message for all conflicts: the first few named, the rest counted.
pub fn message(conflicts: &[Conflict]) -> String {
    const NAMED: usize = 5;
    let mut text: Vec<String> = conflicts
        .iter()
        .take(NAMED)
        .map(ToString::to_string)
        .collect();
    if conflicts.len() > NAMED {
        text.push(format!("and {} more objects", conflicts.len() - NAMED));
    }
    text.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Key {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("shop".into()),
            name: name.into(),
        }
    }

    #[test]
    fn only_objects_that_are_not_ours_conflict_and_each_says_whose_it_is() {
        let found = [
            (key("b"), Ownership::Other("billing".into())),
            (key("ours"), Ownership::Ours),
            (
                key("a"),
                Ownership::Unowned {
                    managed_by: Some("Helm".into()),
                },
            ),
        ];
        let c = conflicts(found);
        assert_eq!(c.len(), 2);
        assert_eq!(
            message(&c),
            "ConfigMap shop/a already exists and no BundleDeployment owns it (it is managed by \
             Helm); objects are never adopted: delete it, or leave it out of the bundle; \
             ConfigMap shop/b already exists and belongs to BundleDeployment \"billing\"; an \
             object has one owner"
        );
    }

    #[test]
    fn many_conflicts_are_counted_past_the_first_five() {
        let found = (0..8).map(|i| {
            (
                key(&format!("c{i}")),
                Ownership::Unowned { managed_by: None },
            )
        });
        let text = message(&conflicts(found));
        assert!(text.ends_with("and 3 more objects"), "{text}");
        assert_eq!(text.matches("already exists").count(), 5);
    }
}
