use k8s_openapi::ByteString;
use olm_api::bundle_deployment::{BundleImageSource, BundleLocalRef, BundleSource};

use super::*;

fn spec(class: &str, source: BundleSource) -> BundleSpec {
    BundleSpec {
        provisioner_class_name: class.into(),
        source,
    }
}

fn entry(name: &str, path: Option<&str>) -> BundleConfigMapSource {
    BundleConfigMapSource {
        config_map: BundleLocalRef { name: name.into() },
        path: path.map(Into::into),
    }
}

fn config_map(data: &[(&str, &str)], immutable: bool) -> ConfigMap {
    ConfigMap {
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        immutable: Some(immutable),
        ..ConfigMap::default()
    }
}

#[test]
fn the_class_names_the_format() {
    let plain = spec(PLAIN_PROVISIONER, BundleSource::default());
    assert_eq!(format_of(&plain), Ok(Format::Plain));
    let registry = spec(REGISTRY_PROVISIONER, BundleSource::default());
    assert_eq!(format_of(&registry), Ok(Format::Registry));
    let helm = spec("core-rukpak-io-helm", BundleSource::default());
    assert_eq!(format_of(&helm), Ok(Format::Helm));
    let kustomize = spec("core-rukpak-io-kustomize", BundleSource::default());
    assert_eq!(format_of(&kustomize), Ok(Format::Kustomize));
    let carvel = format_of(&spec("core-rukpak-io-carvel", BundleSource::default())).unwrap_err();
    assert_eq!(carvel.reason, reasons::UNSUPPORTED_FORMAT);
    assert!(
        carvel.message.contains("\"core-rukpak-io-carvel\""),
        "{carvel}"
    );
}

#[test]
fn image_and_config_map_sources_are_fetched_and_others_named() {
    let image = BundleSource {
        type_: "image".into(),
        image: Some(BundleImageSource {
            r#ref: "r.io/b:1".into(),
            pull_secret: Some(String::new()),
        }),
        ..BundleSource::default()
    };
    assert_eq!(
        wanted(&spec(PLAIN_PROVISIONER, image)),
        Ok(Wanted::Image {
            reference: "r.io/b:1".into(),
            pull_secret: None
        })
    );
    let empty_image = BundleSource {
        type_: "image".into(),
        ..BundleSource::default()
    };
    assert_eq!(
        wanted(&spec(PLAIN_PROVISIONER, empty_image))
            .unwrap_err()
            .reason,
        reasons::INVALID_SOURCE
    );
    let git = BundleSource {
        type_: "git".into(),
        ..BundleSource::default()
    };
    let err = wanted(&spec(PLAIN_PROVISIONER, git)).unwrap_err();
    assert_eq!(err.reason, reasons::UNSUPPORTED_SOURCE);
    assert!(
        err.message
            .starts_with("source type \"git\" is not fetched"),
        "{err}"
    );
    let maps = BundleSource {
        type_: "configMaps".into(),
        config_maps: Some(vec![entry("a", Some("manifests"))]),
        ..BundleSource::default()
    };
    assert!(
        matches!(wanted(&spec(PLAIN_PROVISIONER, maps)), Ok(Wanted::ConfigMaps(m)) if m.len() == 1)
    );
    let escaping = BundleSource {
        type_: "configMaps".into(),
        config_maps: Some(vec![entry("a", Some("../etc"))]),
        ..BundleSource::default()
    };
    assert_eq!(
        wanted(&spec(PLAIN_PROVISIONER, escaping))
            .unwrap_err()
            .reason,
        reasons::INVALID_SOURCE
    );
    let none = BundleSource {
        type_: "configMaps".into(),
        ..BundleSource::default()
    };
    assert!(wanted(&spec(PLAIN_PROVISIONER, none)).is_err());
}

#[test]
fn config_map_keys_become_files_under_their_path() {
    let mut binary = config_map(&[], true);
    binary.binary_data = Some([("b.json".to_owned(), ByteString(b"{}".to_vec()))].into());
    let tree = config_maps_tree(&[
        (
            entry("one", Some("manifests/")),
            config_map(&[("a.yaml", "x: 1")], true),
        ),
        (entry("two", Some("manifests")), binary),
        (entry("three", None), config_map(&[("README", "hi")], true)),
    ])
    .unwrap_or_else(|e| unreachable!("{e}"));
    let names: Vec<&str> = tree.read_dir("manifests").iter().map(|e| e.0).collect();
    assert_eq!(names, ["manifests/a.yaml", "manifests/b.json"]);
    assert_eq!(tree.read_dir("")[1].0, "manifests");
}

#[test]
fn mutable_config_maps_and_keys_given_twice_are_refused() {
    let mutable =
        config_maps_tree(&[(entry("one", None), config_map(&[("a", "1")], false))]).unwrap_err();
    assert_eq!(mutable.reason, reasons::INVALID_SOURCE);
    assert!(
        mutable
            .message
            .starts_with("ConfigMap one is not immutable"),
        "{mutable}"
    );
    let twice = config_maps_tree(&[
        (entry("one", Some("m")), config_map(&[("a", "1")], true)),
        (entry("two", Some("m")), config_map(&[("a", "2")], true)),
    ])
    .unwrap_err();
    assert_eq!(
        twice.message,
        "m/a is given twice: by ConfigMap one and by ConfigMap two"
    );
}

#[test]
fn the_installed_image_is_pulled_by_its_recorded_digest_and_nothing_else() {
    let digest = format!("sha256:{}", "e".repeat(64));
    let image = |reference: &str| Wanted::Image {
        reference: reference.into(),
        pull_secret: Some("pull".into()),
    };
    let tagged = image("127.0.0.1:5000/shop/bundle:v1");
    let recorded = format!("127.0.0.1:5000/shop/bundle@{digest}");
    // The digest the install recorded, with the template's pull secret.
    assert_eq!(pinned(&tagged, Some(&recorded)), image(&recorded));
    // Nothing recorded: the template as it is.
    assert_eq!(pinned(&tagged, None), tagged);
    // Another repository's digest is not the template's content.
    let elsewhere = format!("127.0.0.1:5000/other/bundle@{digest}");
    assert_eq!(pinned(&tagged, Some(&elsewhere)), tagged);
    // A recorded tag pins nothing.
    assert_eq!(
        pinned(&tagged, Some("127.0.0.1:5000/shop/bundle:v2")),
        tagged
    );
    // ConfigMaps are immutable: they are their own pin.
    let maps = Wanted::ConfigMaps(vec![entry("one", None)]);
    assert_eq!(pinned(&maps, Some(&recorded)), maps);
}
