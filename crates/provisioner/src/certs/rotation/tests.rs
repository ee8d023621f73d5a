#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use super::*;

/// Names what it makes by a counter: `ca-1`, `cert-2 by ca-1`.
#[derive(Default)]
struct Fake {
    made: u32,
}

impl Issuer for Fake {
    fn ca(&mut self, now: i64, lifetime: i64) -> Result<Ca, String> {
        self.made += 1;
        Ok(Ca {
            cert: format!("ca-{}\n", self.made),
            key: format!("ca-key-{}", self.made),
            made: now,
            expires: now + lifetime,
        })
    }

    fn serving(&mut self, ca: &Ca, hosts: &[String], _now: i64) -> Result<Issued, String> {
        self.made += 1;
        Ok(Issued {
            cert: format!("cert-{} by {}", self.made, ca.cert.trim()),
            key: format!("key-{}", self.made),
            issuer: ca.cert.clone(),
            hosts: hosts.to_vec(),
            expires: ca.expires,
        })
    }
}

fn webhook() -> Serving {
    Serving {
        deployment: "manager".into(),
        service: "manager-service".into(),
        secret: "manager-service-cert".into(),
        namespace: "op".into(),
    }
}

const LIFE: i64 = 1200;

#[test]
fn a_first_install_makes_a_ca_and_a_certificate_for_each_service() {
    let mut fake = Fake::default();
    let (store, changed) = advance(None, &[webhook()], 0, LIFE, &mut fake).unwrap();
    assert!(changed);
    assert_eq!(store.current.cert, "ca-1\n");
    assert_eq!(store.bundle(), "ca-1\n");
    let issued = &store.serving["op/manager-service"];
    assert_eq!(issued.cert, "cert-2 by ca-1");
    assert_eq!(
        issued.hosts,
        [
            "manager-service.op",
            "manager-service.op.svc",
            "manager-service.op.svc.cluster.local"
        ]
    );
    // Nothing due: the same store, unchanged, until a third of the lifetime before expiry.
    let (again, changed) =
        advance(Some(store.clone()), &[webhook()], 100, LIFE, &mut fake).unwrap();
    assert!(!changed);
    assert_eq!(again, store);
    assert_eq!(next_step(&store, 100, LIFE), 800 - 100);
}

#[test]
fn a_ca_is_trusted_before_it_signs_and_the_old_one_until_it_expires() {
    let mut fake = Fake::default();
    let (store, _) = advance(None, &[webhook()], 0, LIFE, &mut fake).unwrap();
    // Step 1, at 800: a next CA, trusted, signing nothing.
    let (store, changed) = advance(Some(store), &[webhook()], 800, LIFE, &mut fake).unwrap();
    assert!(changed);
    assert_eq!(store.current.cert, "ca-1\n");
    assert_eq!(store.bundle(), "ca-1\nca-3\n");
    assert_eq!(store.serving["op/manager-service"].cert, "cert-2 by ca-1");
    assert_eq!(next_step(&store, 800, LIFE), 100);
    let (same, changed) = advance(Some(store.clone()), &[webhook()], 899, LIFE, &mut fake).unwrap();
    assert!(!changed);
    assert_eq!(same, store);
    // Step 2, at 900: it signs; the certificate is issued again; the old CA stays trusted.
    let (store, changed) = advance(Some(store), &[webhook()], 900, LIFE, &mut fake).unwrap();
    assert!(changed);
    assert_eq!(store.current.cert, "ca-3\n");
    assert_eq!(store.bundle(), "ca-3\nca-1\n");
    assert_eq!(store.serving["op/manager-service"].cert, "cert-4 by ca-3");
    assert!(
        store.previous.as_ref().unwrap().key.is_empty(),
        "an old CA's key is not kept"
    );
    assert_eq!(next_step(&store, 900, LIFE), 300);
    // Step 3, at 1200: the old CA expires and leaves the bundle.
    let (store, changed) = advance(Some(store), &[webhook()], 1200, LIFE, &mut fake).unwrap();
    assert!(changed);
    assert_eq!(store.bundle(), "ca-3\n");
    assert_eq!(store.serving["op/manager-service"].cert, "cert-4 by ca-3");
}

#[test]
fn certificates_follow_the_services_and_an_expired_ca_starts_again() {
    let mut fake = Fake::default();
    let (store, _) = advance(None, &[webhook()], 0, LIFE, &mut fake).unwrap();
    let moved = Serving {
        namespace: "elsewhere".into(),
        ..webhook()
    };
    let (store, changed) = advance(Some(store), &[moved], 10, LIFE, &mut fake).unwrap();
    assert!(changed);
    assert_eq!(
        store.serving.keys().collect::<Vec<_>>(),
        ["elsewhere/manager-service"]
    );
    assert_eq!(
        store.serving["elsewhere/manager-service"].cert,
        "cert-3 by ca-1"
    );
    let (store, _) = advance(Some(store), &[], 20, LIFE, &mut fake).unwrap();
    assert!(store.serving.is_empty());
    // Stopped past the CA's expiry: a new CA, nothing old trusted.
    let (store, changed) = advance(Some(store), &[webhook()], 5000, LIFE, &mut fake).unwrap();
    assert!(changed);
    assert_eq!(store.bundle(), "ca-4\n");
}
