//! One blocking JSON POST over `ureq` (rustls for https).

use condense_text::one_line;
use std::time::Duration;

/// What the server answered, whatever the status.
#[derive(Debug)]
pub(crate) struct HttpReply {
    pub status: u16,
    /// `retry-after-ms` or `retry-after` (seconds), when sent.
    pub retry_after: Option<Duration>,
    pub body: String,
}

/// A reusable client (keeps connections alive between attempts).
pub(crate) struct Http {
    agent: ureq::Agent,
}

impl Http {
    /// A client whose every request gives up after `timeout`. Proxies come from the usual
    /// environment variables (`HTTPS_PROXY`, `NO_PROXY`, ...), except for loopback hosts.
    pub(crate) fn new(timeout: Duration, loopback: bool) -> Self {
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .user_agent(concat!("condense/", env!("CARGO_PKG_VERSION")));
        if loopback {
            config = config.proxy(None);
        }
        Http {
            agent: config.build().new_agent(),
        }
    }

    /// POSTs `body` as JSON. `Err` is a transport failure (connect, TLS, timeout), one line.
    pub(crate) fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &str,
    ) -> Result<HttpReply, String> {
        let mut req = self
            .agent
            .post(url)
            .header("content-type", "application/json");
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let mut resp = req.send(body).map_err(|e| one_line(&e.to_string()))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        // Seconds (or milliseconds) as a finite, non-negative number of at most a day; an
        // HTTP date is ignored (the exponential backoff applies).
        let seconds = |v: &str, scale: f64| {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .map(|x| Duration::from_secs_f64((x / scale).clamp(0.0, 86_400.0)))
        };
        let retry_after = header("retry-after-ms")
            .and_then(|v| seconds(v, 1000.0))
            .or_else(|| header("retry-after").and_then(|v| seconds(v, 1.0)));
        let body = resp.body_mut().read_to_string().map_err(|e| {
            format!(
                "HTTP {status}, reading the reply: {}",
                one_line(&e.to_string())
            )
        })?;
        Ok(HttpReply {
            status,
            retry_after,
            body,
        })
    }
}
