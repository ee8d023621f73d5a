//! The Services in front of the Deployments that serve webhooks and APIServices, as OLM v0
//! and operator-controller make them (`BundleDeploymentServiceResourceGenerator`): one per such
//! Deployment, `<deployment>-service` (dots made dashes), selecting the Deployment's Pods, with
//! one port per port its webhooks and APIServices declare (443 when none is), sorted. Each is a
//! [`Serving`]: what needs a serving certificate, issued for the Service's names into the
//! Secret `<service>-cert` (OLM v0's names).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::csv::{Csv, port_or_default};
use super::made;
use super::names::with_suffix;
use crate::object::Object;

/// A Deployment serving webhooks or APIServices, behind a Service, with the Secret its serving
/// certificate is kept in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Serving {
    /// The Deployment.
    pub deployment: String,
    /// Its Service.
    pub service: String,
    /// The Secret of its serving certificate.
    pub secret: String,
    /// The namespace of all three.
    pub namespace: String,
}

impl Serving {
    /// The names the API server calls the Service by: the certificate's subject names.
    pub fn hosts(&self) -> [String; 3] {
        let (s, ns) = (&self.service, &self.namespace);
        [
            format!("{s}.{ns}"),
            format!("{s}.{ns}.svc"),
            format!("{s}.{ns}.svc.cluster.local"),
        ]
    }
}

/// The Service of `deployment` (upstream's name).
pub fn service_name(deployment: &str) -> String {
    with_suffix(&deployment.replace('.', "-"), "service")
}

/// The Secret of `service`'s serving certificate (upstream's name).
pub fn secret_name(service: &str) -> String {
    with_suffix(service, "cert")
}

/// One port of a Service: the port, and the container's port it goes to.
type Port = (i32, Target);

/// A container's port: a number or a port's name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Number(i64),
    Name(String),
}

impl Target {
    fn of(value: &Value) -> Target {
        match value {
            Value::String(s) => Target::Name(s.clone()),
            v => Target::Number(v.as_i64().unwrap_or(0)),
        }
    }

    fn value(&self) -> Value {
        match self {
            Target::Number(n) => json!(n),
            Target::Name(s) => json!(s),
        }
    }

    /// Its number, as Go's `IntOrString.IntValue` reads it (a name is 0).
    fn number(&self) -> i64 {
        match self {
            Target::Number(n) => *n,
            Target::Name(s) => s.parse().unwrap_or(0),
        }
    }
}

/// The ports each Deployment serves webhooks and APIServices on.
fn ports(csv: &Csv) -> BTreeMap<&str, BTreeSet<Port>> {
    let mut ports: BTreeMap<&str, BTreeSet<Port>> = BTreeMap::new();
    for w in &csv.spec.webhookdefinitions {
        let port = port_or_default(w.container_port);
        let target = w
            .target_port
            .as_ref()
            .map_or(Target::Number(i64::from(port)), Target::of);
        ports
            .entry(&w.deployment_name)
            .or_default()
            .insert((port, target));
    }
    for a in &csv.spec.apiservicedefinitions.owned {
        let port = port_or_default(a.container_port);
        ports
            .entry(&a.deployment_name)
            .or_default()
            .insert((port, Target::Number(i64::from(port))));
    }
    ports
}

/// The Deployments of the CSV that serve webhooks or APIServices, in the CSV's order.
pub fn serving(csv: &Csv, namespace: &str) -> Vec<Serving> {
    let ports = ports(csv);
    csv.spec
        .install
        .spec
        .deployments
        .iter()
        .filter(|d| ports.contains_key(d.name.as_str()))
        .map(|d| {
            let service = service_name(&d.name);
            Serving {
                deployment: d.name.clone(),
                secret: secret_name(&service),
                service,
                namespace: namespace.to_owned(),
            }
        })
        .collect()
}

/// The Services of the Deployments of [`serving`].
pub fn objects(csv: &Csv, namespace: &str) -> Vec<Object> {
    let ports = ports(csv);
    csv.spec
        .install
        .spec
        .deployments
        .iter()
        .filter_map(|d| {
            let ports = ports.get(d.name.as_str())?;
            let name = service_name(&d.name);
            // Sorted by port, then by the container's port (a number before a name).
            let mut list: Vec<&Port> = ports.iter().collect();
            list.sort_by_key(|(port, target)| (*port, target.number()));
            let list: Vec<Value> = list
                .into_iter()
                .map(|(port, target)| {
                    json!({"name": port.to_string(), "port": port, "targetPort": target.value()})
                })
                .collect();
            let mut spec = json!({"ports": list});
            if let Some(labels) = d.spec.get("selector").and_then(|s| s.get("matchLabels")) {
                spec["selector"] = labels.clone();
            }
            Some(made(
                "v1",
                "Service",
                Some(namespace),
                &name,
                json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": namespace}, "spec": spec}),
            ))
        })
        .collect()
}
