//! The certificates of one reconcile: what the chosen provider puts into the objects, and for
//! the provisioner's own CA, its store advanced to now (written before anything it signs is
//! applied) and when its next step falls due.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::certs::issue::Rcgen;
use crate::certs::rotation::{advance, next_step};
use crate::certs::{Injection, Provider};
use crate::format::registry::Serving;
use crate::marks::Owner;
use crate::status::Attempt;

use super::Context;

/// What a sync puts in, and when the next step is due.
pub struct Prepared {
    /// What goes into the objects.
    pub injection: Injection,
    /// How soon the next step of the provisioner's own CA falls due.
    pub due: Option<Duration>,
}

/// The certificates for `serving`, as `ctx` issues them.
pub async fn prepare(
    ctx: &Context,
    owner: &Owner,
    serving: &[Serving],
) -> Result<Prepared, Attempt> {
    let nothing = |injection| Prepared {
        injection,
        due: None,
    };
    if serving.is_empty() {
        return Ok(nothing(Injection::Nothing));
    }
    match ctx.certs.provider {
        Provider::CertManager => return Ok(nothing(Injection::CertManager)),
        Provider::ServiceCa => return Ok(nothing(Injection::ServiceCa)),
        Provider::Provisioner => {}
    }
    let failed = |e: String| Attempt::ApplyFailed(format!("serving certificates: {e}"));
    let stores = &ctx.certs.stores;
    let kept = stores
        .load(owner)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let lifetime = i64::try_from(ctx.certs.lifetime.as_secs()).unwrap_or(i64::MAX);
    let (store, changed) = advance(kept, serving, now, lifetime, &mut Rcgen).map_err(failed)?;
    if changed {
        stores
            .save(owner, &store)
            .await
            .map_err(|e| failed(e.to_string()))?;
        tracing::info!(bundle_deployment = %owner.name, "serving certificates issued or rotated");
    }
    let due = Duration::from_secs(u64::try_from(next_step(&store, now, lifetime)).unwrap_or(0));
    Ok(Prepared {
        injection: Injection::own(&store),
        // A second late rather than early: at the step's time it is due.
        due: Some(due + Duration::from_secs(1)),
    })
}
