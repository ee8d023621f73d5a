//! Which namespaces a registry+v1 operator watches (its install mode), from the namespaces a
//! BundleDeployment asks for and the modes the CSV supports: upstream's rules
//! (operator-controller's `validateTargetNamespaces`, OLM v0's `InstallModeSet.Supports`).
//!
//! Nothing asked: all namespaces when the CSV supports AllNamespaces, else its install
//! namespace when it supports OwnNamespace (upstream v1 asks the user to say it; OLM v0's
//! users wrote an OperatorGroup for it), else a refusal saying to name the namespaces. Asked:
//! `[""]` is AllNamespaces, the install namespace alone OwnNamespace, one other namespace
//! SingleNamespace, several MultiNamespace (which may include the install namespace only when
//! OwnNamespace is supported too). Each is refused, before anything is applied, when the CSV
//! does not declare it, naming the mode asked and the modes it supports.

use std::collections::BTreeSet;

use super::csv::Csv;

/// The install modes, in OLM's order.
const MODES: [&str; 4] = [
    "OwnNamespace",
    "SingleNamespace",
    "MultiNamespace",
    "AllNamespaces",
];

/// What an installed operator watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Every namespace (`olm.targetNamespaces: ""`).
    All,
    /// Its install namespace only.
    Own(String),
    /// One namespace other than its install namespace.
    Single(String),
    /// Several namespaces, sorted.
    Multi(Vec<String>),
}

impl Mode {
    /// The namespaces it watches (none for all namespaces).
    pub fn targets(&self) -> Vec<&str> {
        match self {
            Mode::All => Vec::new(),
            Mode::Own(ns) | Mode::Single(ns) => vec![ns.as_str()],
            Mode::Multi(list) => list.iter().map(String::as_str).collect(),
        }
    }

    /// The Pod template's `olm.targetNamespaces`: the targets comma-joined, sorted as OLM v0
    /// writes them (`""`: all namespaces).
    pub fn annotation(&self) -> String {
        self.targets().join(",")
    }

    /// Its install mode's name.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::All => "AllNamespaces",
            Mode::Own(_) => "OwnNamespace",
            Mode::Single(_) => "SingleNamespace",
            Mode::Multi(_) => "MultiNamespace",
        }
    }

    /// The mode, with what it watches, for messages.
    fn described(&self) -> String {
        match self {
            Mode::All => "AllNamespaces (watching all namespaces)".to_owned(),
            Mode::Own(ns) => format!("OwnNamespace (watching its install namespace {ns:?})"),
            Mode::Single(ns) => format!("SingleNamespace (watching {ns:?})"),
            Mode::Multi(list) => format!("MultiNamespace (watching {})", quoted(list)),
        }
    }
}

/// Why the namespaces asked cannot be watched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// The CSV does not declare the mode the namespaces asked make.
    #[error(
        "unsupported install mode: {asked} is not supported by this bundle's ClusterServiceVersion (it supports {supported})"
    )]
    Unsupported {
        /// The mode asked, with its namespaces.
        asked: String,
        /// The modes the CSV supports.
        supported: String,
    },
    /// Nothing asked, and neither AllNamespaces nor OwnNamespace to default to.
    #[error(
        "no install mode to default to: this bundle's ClusterServiceVersion supports {supported}, neither AllNamespaces nor OwnNamespace; name the namespaces it watches (watchNamespace, or targetNamespaces for several)"
    )]
    NoDefault {
        /// The modes the CSV supports.
        supported: String,
    },
    /// The install namespace among several, without OwnNamespace.
    #[error(
        "unsupported install mode: watching the install namespace {install:?} among others ({asked}) needs OwnNamespace as well as MultiNamespace; this bundle's ClusterServiceVersion supports {supported}"
    )]
    OwnAmongMany {
        /// The install namespace.
        install: String,
        /// The namespaces asked.
        asked: String,
        /// The modes the CSV supports.
        supported: String,
    },
    /// All namespaces (`""`) together with others.
    #[error(
        "all namespaces (\"\") cannot be watched together with other namespaces ({0}): name them or all, not both"
    )]
    AllAndOthers(String),
}

/// The modes `csv` supports, in OLM's order, as a message says them.
pub fn supported(csv: &Csv) -> String {
    let modes: Vec<&str> = MODES.into_iter().filter(|m| csv.supports(m)).collect();
    if modes.is_empty() {
        "none".to_owned()
    } else {
        modes.join(", ")
    }
}

/// What the operator of `csv`, installed in `install`, watches when `asked` these namespaces
/// (`None`: nothing asked).
pub fn decide(csv: &Csv, install: &str, asked: Option<&[String]>) -> Result<Mode, ModeError> {
    let Some(asked) = asked.filter(|a| !a.is_empty()) else {
        if csv.supports("AllNamespaces") {
            return Ok(Mode::All);
        }
        if csv.supports("OwnNamespace") {
            return Ok(Mode::Own(install.to_owned()));
        }
        return Err(ModeError::NoDefault {
            supported: supported(csv),
        });
    };
    let set: BTreeSet<&str> = asked.iter().map(String::as_str).collect();
    let mode = if set.contains("") {
        if set.len() > 1 {
            let others: Vec<String> = set
                .iter()
                .filter(|n| !n.is_empty())
                .map(|n| (*n).to_owned())
                .collect();
            return Err(ModeError::AllAndOthers(quoted(&others)));
        }
        Mode::All
    } else if set.len() == 1 {
        let only = set.iter().next().map_or("", |n| *n).to_owned();
        if only == install {
            Mode::Own(only)
        } else {
            Mode::Single(only)
        }
    } else {
        Mode::Multi(set.iter().map(|n| (*n).to_owned()).collect())
    };
    if !csv.supports(mode.name()) {
        return Err(ModeError::Unsupported {
            asked: mode.described(),
            supported: supported(csv),
        });
    }
    if let Mode::Multi(list) = &mode {
        // The install namespace among several needs OwnNamespace too (upstream's rule).
        if list.iter().any(|n| n == install) && !csv.supports("OwnNamespace") {
            return Err(ModeError::OwnAmongMany {
                install: install.to_owned(),
                asked: quoted(list),
                supported: supported(csv),
            });
        }
    }
    Ok(mode)
}

fn quoted(list: &[String]) -> String {
    list.iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
