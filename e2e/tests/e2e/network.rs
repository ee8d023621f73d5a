//! The sources' network policy, on the shared catalogd (which, as an admin of this machine
//! would, allows loopback, where every test server listens): link-local addresses, a cloud's
//! metadata service among them, are never reached by any source, directly or through a
//! redirect, and each refusal is a `HostNotAllowed` condition and an event.

use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use olm_e2e::catalogs::{create_catalog, unpacked_message, wait_reason};
use olm_e2e::context::TestContext;
use olm_e2e::manager::catalogd;
use serde_json::json;

use crate::catalogd::wait_for_event;

#[tokio::test]
async fn no_source_reaches_a_link_local_address() {
    let ctx = TestContext::new("net-linklocal").await.unwrap();
    let cd = catalogd().unwrap();
    let metadata = "http://169.254.169.254/latest/meta-data/";
    let redirect = olm_e2e::serve::http_redirect(metadata).await.unwrap();
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), "default");
    for (suffix, source, what) in [
        (
            "http",
            json!({"type": "http", "http": {"url": metadata}}),
            "169.254.169.254",
        ),
        // The first hop is allowed (loopback, here); the redirect is not followed.
        (
            "redirect",
            json!({"type": "http", "http": {"url": redirect}}),
            "169.254.169.254",
        ),
        (
            "image",
            json!({"type": "image", "image": {"ref": "169.254.169.254/catalogs/index:1"}}),
            "169.254.169.254",
        ),
        (
            "git",
            json!({"type": "git", "git": {"repository": "https://169.254.169.254/catalogs.git", "ref": {"branch": "main"}}}),
            "169.254.169.254",
        ),
        (
            "ipv6",
            json!({"type": "http", "http": {"url": "http://[fe80::1]/catalog.yaml"}}),
            "fe80::1",
        ),
    ] {
        let name = ctx.name(&format!("ll-{suffix}"));
        let api = create_catalog(&ctx, &name, source).await.unwrap();
        let c = wait_reason(&api, &name, "HostNotAllowed").await.unwrap();
        let message = unpacked_message(&c);
        assert!(
            message.contains(what) && message.contains("--allow-link-local-sources"),
            "{suffix}: {message}"
        );
        let event = wait_for_event(&events, &name, "HostNotAllowed").await;
        assert!(event.note.unwrap_or_default().contains(what), "{suffix}");
    }
    assert!(cd.manager.is_running());
    ctx.cleanup().await.unwrap();
}
