//! A real Prometheus (Debian's `prometheus`), started on loopback with a generated scrape
//! configuration, stopped when the test process exits; and its query API.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::manager::{Manager, free_port, run_base, spawn, wait_ready};
use crate::{Error, Result};

/// One scrape job: a manager's admin server over HTTPS, with a bearer token.
#[derive(Debug, Clone)]
pub struct Job {
    /// The job's name (the `job` label).
    pub name: String,
    /// `host:port` of the admin server.
    pub target: String,
    /// The name its certificate is checked for, when not the target's host (a Service's DNS
    /// name, scraped at its ClusterIP from outside the cluster).
    pub server_name: Option<String>,
}

/// A running Prometheus.
#[derive(Debug)]
pub struct Prometheus {
    /// Its base URL.
    pub url: String,
    /// The process.
    pub manager: Manager,
}

/// The scrape configuration: every `jobs` entry scraped each second over HTTPS, trusting
/// `ca_file` and sending the token in `token_file`.
pub fn config(jobs: &[Job], ca_file: &Path, token_file: &Path) -> String {
    let mut text = String::from(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
    );
    for job in jobs {
        let server_name = job
            .server_name
            .as_ref()
            .map(|n| format!("\n    server_name: {n}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "- job_name: {name}\n  scheme: https\n  tls_config:\n    ca_file: {ca}{server_name}\n  authorization:\n    credentials_file: {token}\n  static_configs:\n  - targets: ['{target}']\n",
            name = job.name,
            ca = ca_file.display(),
            token = token_file.display(),
            target = job.target,
        ));
    }
    text
}

/// Starts Prometheus, named `name` in logs, scraping `jobs`; waits until it is ready.
pub fn start(name: &str, jobs: &[Job], ca_file: &Path, token: &str) -> Result<Prometheus> {
    let base = run_base()?;
    let dir = base.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let write = |path: PathBuf, text: &str| -> Result<PathBuf> {
        std::fs::write(&path, text).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok(path)
    };
    std::fs::create_dir_all(dir.join("data")).map_err(|source| Error::Io {
        path: dir.display().to_string(),
        source,
    })?;
    crate::process::remove_on_exit(&dir)?;
    let token_file = write(dir.join("token"), token)?;
    let config_file = write(
        dir.join("prometheus.yml"),
        &config(jobs, ca_file, &token_file),
    )?;
    let port = free_port()?;
    let args = vec![
        format!("--config.file={}", config_file.display()),
        format!("--storage.tsdb.path={}", dir.join("data").display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
        "--log.level=warn".to_owned(),
    ];
    let log = base.join("logs").join(format!("{name}.log"));
    let binary = crate::process::which("prometheus").ok_or_else(|| {
        Error::Cluster(
            "prometheus is not installed (hack/prereqs.sh installs Debian's prometheus)".into(),
        )
    })?;
    // No kubeconfig is needed; the manager helper only sets it in the environment.
    let manager = spawn(&binary, &args, Path::new("/dev/null"), &log, &dir)?;
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&format!("{url}/-/ready"), &manager)?;
    Ok(Prometheus { url, manager })
}

impl Prometheus {
    /// The result vector of the instant query `query`.
    pub async fn query(&self, query: &str) -> Result<Vec<serde_json::Value>> {
        let response: serde_json::Value = reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", query)])
            .send()
            .await
            .map_err(|e| Error::Cluster(format!("querying {query}: {e}")))?
            .json()
            .await
            .map_err(|e| Error::Cluster(format!("querying {query}: {e}")))?;
        Ok(response["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Waits (at most `deadline`) until `query` returns a series for which `done` holds.
    pub async fn wait(
        &self,
        query: &str,
        deadline: Duration,
        done: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Result<Vec<serde_json::Value>> {
        let until = Instant::now() + deadline;
        loop {
            let result = self.query(query).await?;
            if done(&result) {
                return Ok(result);
            }
            if Instant::now() > until {
                return Err(Error::Timeout {
                    what: format!("Prometheus: {query}"),
                    seconds: deadline.as_secs(),
                    last_state: serde_json::Value::Array(result).to_string(),
                });
            }
            // Polling the query API, bounded by the deadline above.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The value of one series of a query result.
pub fn value(series: &serde_json::Value) -> Option<f64> {
    series["value"][1].as_str()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_job_is_scraped_over_https_with_the_token() {
        let config = super::config(
            &[
                super::Job {
                    name: "catalogd".into(),
                    target: "127.0.0.1:8443".into(),
                    server_name: None,
                },
                super::Job {
                    name: "provisioner".into(),
                    target: "10.96.1.9:8080".into(),
                    server_name: Some("provisioner-metrics.olm-system.svc".into()),
                },
            ],
            std::path::Path::new("/ca.crt"),
            std::path::Path::new("/token"),
        );
        assert!(config.contains("- job_name: catalogd\n  scheme: https\n"));
        assert!(config.contains("ca_file: /ca.crt"));
        assert!(config.contains("credentials_file: /token"));
        assert!(config.contains("targets: ['127.0.0.1:8443']"));
        assert!(
            !config
                .split("- job_name: provisioner")
                .next()
                .unwrap_or_default()
                .contains("server_name")
        );
        assert!(config.contains("    server_name: provisioner-metrics.olm-system.svc\n"));
    }
}
