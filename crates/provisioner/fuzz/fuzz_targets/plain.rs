//! Any bytes as a manifest file of a plain bundle: never a panic; and when they read as
//! objects, those objects written back as a JSON stream read as the very same objects, each
//! with the key its manifest gives (a second path through the reader must agree).
#![no_main]

use libfuzzer_sys::fuzz_target;
use provisioner::bundle::Tree;
use provisioner::format::plain;
use provisioner::object::Object;

fuzz_target!(|data: &[u8]| {
    let tree = Tree::new().file("manifests/a.yaml", data);
    let Ok(objects) = plain::objects(&tree) else {
        return;
    };
    let stream: String = objects
        .iter()
        .map(|o| format!("{}\n", serde_json::Value::Object(o.manifest.clone())))
        .collect();
    let again = plain::objects(&Tree::new().file("manifests/b.json", stream))
        .unwrap_or_else(|e| panic!("objects written back do not read: {e}"));
    assert_eq!(again, objects);
    for object in &objects {
        let rebuilt = Object::from_manifest(serde_json::Value::Object(object.manifest.clone()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rebuilt.key, object.key);
    }
});
