//! The Catalogs' content, read for resolution: fetched at once through the content client
//! (I/O, [`fetch`]), then sorted out ([`sort_out`], pure) into what takes part and what is
//! left out, and why.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::future::join_all;
use olm_resolver::resolve::CatalogContent;

use crate::content::{ContentClient, FetchError};
use crate::inputs::{Availability, CatalogFacts};

use super::LeftOut;

/// What one Catalog's fetch gave: nothing when it serves nothing.
pub type Got = Option<Result<Arc<CatalogContent>, FetchError>>;

/// The content of every Catalog of `facts` that serves some, in the same order.
pub async fn fetch(content: &ContentClient, facts: &[CatalogFacts]) -> Vec<Got> {
    join_all(facts.iter().map(|f| async move {
        match &f.availability {
            Availability::Serving { hash, url } => Some(content.content(&f.name, hash, url).await),
            Availability::NotServing(_) => None,
        }
    }))
    .await
}

/// The Catalogs sorted out.
#[derive(Default)]
pub struct Sorted<'a> {
    /// Those taking part, with their content, in `facts` order.
    pub available: Vec<(&'a CatalogFacts, Arc<CatalogContent>)>,
    /// Those left out, by name, and why.
    pub left_out: BTreeMap<String, LeftOut>,
    /// The content hash of each Catalog taking part.
    pub hashes: HashMap<String, String>,
}

/// Sorts `facts` by what their fetch `got` (same order): content that is not the Catalog's
/// hash waits as an unreachable catalogd does; invalid content is left out.
pub fn sort_out(facts: &[CatalogFacts], got: Vec<Got>) -> Sorted<'_> {
    let mut sorted = Sorted::default();
    for (f, got) in facts.iter().zip(got) {
        match (got, &f.availability) {
            (Some(Ok(content)), Availability::Serving { hash, .. }) => {
                sorted.hashes.insert(f.name.clone(), hash.clone());
                sorted.available.push((f, content));
            }
            (Some(Err(FetchError::Unreachable(m) | FetchError::Mismatch(m))), _) => {
                sorted
                    .left_out
                    .insert(f.name.clone(), LeftOut::Unreachable(m));
            }
            (Some(Err(FetchError::Invalid(m))), _) => {
                sorted.left_out.insert(f.name.clone(), LeftOut::Invalid(m));
            }
            (_, Availability::NotServing(why)) => {
                sorted
                    .left_out
                    .insert(f.name.clone(), LeftOut::NotServing(why.clone()));
            }
            // Never made: a serving Catalog is always fetched.
            (None, Availability::Serving { .. }) => {}
        }
    }
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(name: &str, availability: Availability) -> CatalogFacts {
        CatalogFacts {
            name: name.into(),
            labels: BTreeMap::new(),
            priority: 0,
            availability,
        }
    }

    fn serving(hash: &str) -> Availability {
        Availability::Serving {
            hash: hash.into(),
            url: "http://c/all.json".into(),
        }
    }

    #[test]
    fn each_fetch_result_takes_part_or_is_left_out_with_its_reason() {
        let all = [
            facts("ok", serving("h1")),
            facts("down", serving("h2")),
            facts("tampered", serving("h3")),
            facts("bad", serving("h4")),
            facts("new", Availability::NotServing("not unpacked yet".into())),
        ];
        let got = vec![
            Some(Ok(Arc::new(CatalogContent::default()))),
            Some(Err(FetchError::Unreachable("refused".into()))),
            Some(Err(FetchError::Mismatch("hash".into()))),
            Some(Err(FetchError::Invalid("not json".into()))),
            None,
        ];
        let sorted = sort_out(&all, got);
        let names: Vec<&str> = sorted.available.iter().map(|(f, _)| &*f.name).collect();
        assert_eq!(names, ["ok"]);
        assert_eq!(sorted.hashes, HashMap::from([("ok".into(), "h1".into())]));
        assert_eq!(
            sorted.left_out,
            BTreeMap::from([
                ("bad".into(), LeftOut::Invalid("not json".into())),
                ("down".into(), LeftOut::Unreachable("refused".into())),
                ("new".into(), LeftOut::NotServing("not unpacked yet".into())),
                ("tampered".into(), LeftOut::Unreachable("hash".into())),
            ])
        );
    }
}
