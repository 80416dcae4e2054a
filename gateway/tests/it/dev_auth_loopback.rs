//! The `dev-*` auth backends check no credential (issue 32, item 11): whoever reaches such
//! a gateway acts as its dev user, an admin by default. Bound beyond loopback — MCC's own
//! default is `0.0.0.0` with `dev-admin` — the real binary serves loopback clients and
//! answers everyone else 403, naming why, before reading a request.

use crate::mcp_support;

use mcp_support::replica::*;
use mcp_support::*;

/// This machine's address on its default route (what another host would connect to).
fn non_loopback_address() -> std::net::IpAddr {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // A UDP connect sends nothing: it only picks the route and so the source address.
    probe
        .connect("192.0.2.1:9")
        .expect("this test needs a route beyond loopback (an address other hosts reach)");
    let ip = probe.local_addr().unwrap().ip();
    assert!(!ip.is_loopback(), "no address beyond loopback: {ip}");
    ip
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_auth_serves_loopback_clients_only() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = spawn_gateway(
        dir.path(),
        &[
            ("MCC_SERVER__HOST", "0.0.0.0".to_string()),
            ("MCC_AUTH", "dev-admin".to_string()),
        ],
    )
    .await;
    let http = http_client();
    // spawn_gateway waited for /readyz over 127.0.0.1: loopback is served.
    let local = http
        .get(format!("{}/healthz", gateway.base))
        .send()
        .await
        .unwrap();
    assert_eq!(local.status(), 200);

    let outside = format!("http://{}:{}/mcp", non_loopback_address(), gateway.port);
    let r = http.post(&outside).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 403);
    let text = r.text().await.unwrap();
    assert!(text.contains("loopback clients only"), "{text}");
}
