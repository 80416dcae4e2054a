//! The `api_key` and dev backends: keys minted with the operator helper, looked up by
//! prefix, checked by hash, expiry and revocation on reload; dev users from the catalog.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::routing::get;
use axum::{Extension, Router};
use chrono::{Duration, Utc};
use http::{HeaderMap, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mcc_catalog::User;
use mcc_gateway::auth::api_key::{self, MintedKey};
use mcc_gateway::auth::{
    AuthError, AuthSettings, Authenticator, Directory, Identity, SharedDirectory, UserEntry,
    authenticate_request,
};

fn user(name: &str, groups: &[&str]) -> User {
    User {
        username: name.into(),
        email: None,
        groups: groups.iter().map(|g| g.to_string()).collect(),
        tools: vec![],
    }
}

fn entry(user: User, keys: &[&MintedKey]) -> UserEntry {
    UserEntry {
        user,
        api_keys: keys.iter().map(|k| k.entry.clone()).collect(),
        ..UserEntry::default()
    }
}

fn directory(entries: Vec<UserEntry>) -> Directory {
    Directory::new(entries).unwrap()
}

fn api_key_auth(users: &SharedDirectory) -> Authenticator {
    let settings = AuthSettings {
        backend: "api_key".into(),
        ..AuthSettings::default()
    };
    Authenticator::new(&settings, users.clone()).unwrap()
}

fn with_header(name: &'static str, value: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(name, value.parse().unwrap());
    headers
}

async fn who(auth: &Authenticator, headers: HeaderMap) -> Result<String, AuthError> {
    auth.authenticate(&headers)
        .await
        .map(|id| id.username().to_string())
}

fn invalid() -> Result<String, AuthError> {
    Err(AuthError::InvalidToken("invalid API key".into()))
}

#[tokio::test]
async fn valid_keys_log_in_by_either_header() {
    let key = api_key::mint(Some(Utc::now() + Duration::days(90))).unwrap();
    let users = SharedDirectory::new(directory(vec![entry(user("alice", &["osint"]), &[&key])]));
    let auth = api_key_auth(&users);
    let id = auth
        .authenticate(&with_header("x-api-key", key.raw.expose()))
        .await
        .unwrap();
    assert_eq!(id.user.unwrap().groups, vec!["osint".to_string()]);
    let bearer = with_header("authorization", &format!("Bearer {}", key.raw.expose()));
    assert_eq!(who(&auth, bearer).await.unwrap(), "alice");
}

#[tokio::test]
async fn wrong_secret_unknown_prefix_and_malformed_keys_are_refused_alike() {
    let key = api_key::mint(None).unwrap();
    let users = SharedDirectory::new(directory(vec![entry(user("alice", &[]), &[&key])]));
    let auth = api_key_auth(&users);
    let prefix = &key.entry.prefix;
    let wrong_secret = format!("mcc_{prefix}_{}", "A".repeat(32));
    let other = api_key::mint(None).unwrap().raw.expose().to_owned();
    for bad in [wrong_secret.as_str(), other.as_str(), "mcc_nothex", "hello"] {
        assert_eq!(
            who(&auth, with_header("x-api-key", bad)).await,
            invalid(),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn expired_keys_are_refused() {
    let expired = api_key::mint(Some(Utc::now() - Duration::seconds(1))).unwrap();
    let users = SharedDirectory::new(directory(vec![entry(user("alice", &[]), &[&expired])]));
    let auth = api_key_auth(&users);
    assert_eq!(
        who(&auth, with_header("x-api-key", expired.raw.expose())).await,
        Err(AuthError::InvalidToken("API key expired".into()))
    );
}

#[tokio::test]
async fn reload_revokes_at_once() {
    let kept = api_key::mint(None).unwrap();
    let revoked = api_key::mint(None).unwrap();
    let users = SharedDirectory::new(directory(vec![
        entry(user("alice", &[]), &[&kept, &revoked]),
        entry(user("bob", &["admin"]), &[]),
    ]));
    let auth = api_key_auth(&users);
    assert_eq!(
        who(&auth, with_header("x-api-key", revoked.raw.expose()))
            .await
            .unwrap(),
        "alice"
    );

    // The users file loses one of alice's keys: the next request with it fails.
    users.replace(directory(vec![
        entry(user("alice", &[]), &[&kept]),
        entry(user("bob", &["admin"]), &[]),
    ]));
    assert_eq!(
        who(&auth, with_header("x-api-key", revoked.raw.expose())).await,
        invalid()
    );
    assert_eq!(
        who(&auth, with_header("x-api-key", kept.raw.expose()))
            .await
            .unwrap(),
        "alice"
    );

    // Removing the user removes their keys.
    users.replace(directory(vec![entry(user("bob", &["admin"]), &[])]));
    assert_eq!(
        who(&auth, with_header("x-api-key", kept.raw.expose())).await,
        invalid()
    );
}

#[tokio::test]
async fn missing_key_is_refused_unless_anonymous_is_allowed() {
    let users = SharedDirectory::new(directory(vec![]));
    let strict = api_key_auth(&users);
    let err = strict.authenticate(&HeaderMap::new()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "authentication required: send 'Authorization: Bearer <token>' or 'X-API-Key: <key>'"
    );
    let open = Authenticator::new(
        &AuthSettings {
            backend: "api_key".into(),
            allow_anonymous: true,
            ..AuthSettings::default()
        },
        users,
    )
    .unwrap();
    assert_eq!(
        open.authenticate(&HeaderMap::new()).await.unwrap(),
        Identity::anonymous()
    );
}

#[tokio::test]
async fn dev_backends_use_the_first_catalog_user_of_the_group_or_a_stand_in() {
    let users = SharedDirectory::new(directory(vec![]));
    let dev = |backend: &str| {
        let settings = AuthSettings {
            backend: backend.into(),
            ..AuthSettings::default()
        };
        Authenticator::new(&settings, users.clone()).unwrap()
    };
    let (admin, public) = (dev("dev-admin"), dev("dev-public"));
    // Credentials are ignored entirely by the dev backends.
    let junk = with_header("authorization", "Bearer whatever");
    let stand_in = admin.authenticate(&junk).await.unwrap().user.unwrap();
    assert_eq!(stand_in, user("dev-admin", &["admin"]));
    let stand_in = public
        .authenticate(&HeaderMap::new())
        .await
        .unwrap()
        .user
        .unwrap();
    assert_eq!(stand_in, user("dev-public", &["public"]));

    users.replace(directory(vec![
        entry(user("carol", &["osint"]), &[]),
        entry(user("dora", &["public", "admin"]), &[]),
        entry(user("erin", &["admin"]), &[]),
    ]));
    assert_eq!(who(&admin, HeaderMap::new()).await.unwrap(), "dora");
    assert_eq!(who(&public, HeaderMap::new()).await.unwrap(), "dora");
}

async fn whoami(Extension(identity): Extension<Identity>) -> String {
    identity.username().to_string()
}

#[tokio::test]
async fn api_keys_over_http() {
    let key = api_key::mint(None).unwrap();
    let users = SharedDirectory::new(directory(vec![entry(user("alice", &[]), &[&key])]));
    let router =
        Router::new()
            .route("/mcp", get(whoami))
            .layer(axum::middleware::from_fn_with_state(
                api_key_auth(&users),
                authenticate_request,
            ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let call = |key: &str| {
        let request = http::Request::get(format!("http://{addr}/mcp"))
            .header("x-api-key", key)
            .body(Empty::new())
            .unwrap();
        client.request(request)
    };
    let ok = call(key.raw.expose()).await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(ok.into_body().collect().await.unwrap().to_bytes(), "alice");

    let refused = call("mcc_000000000000_nope").await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        refused.headers()[header::WWW_AUTHENTICATE],
        "Bearer realm=\"mcc\", error=\"invalid_token\", error_description=\"invalid token: invalid API key\""
    );
}
