//! Held upstream calls across replicas: the retry that answers an upstream's question
//! may land on any replica, while the question waits in the one that holds the call
//! ([`super::held`]). The answering replica forwards the answer over Redis pub/sub to the
//! holder's channel, `<prefix>:upstream-held:<replica id>` (one per replica, subscribed
//! from start to shutdown), and waits on its own channel for what follows: the call's
//! result, its next question (which stays held where it is), or why it failed.
//!
//! - A holder that is gone (nobody subscribes to its channel: restarted, scaled down) is
//!   known at once from the publish, and the caller is told to call again.
//! - Bounded: at most [`super::held::MAX_HELD`] answers waited for and handled at once
//!   per replica; an answer at most [`MAX_ANSWER`] bytes; a result at most
//!   [`MAX_RESULT`] bytes of JSON (a larger one is an error, never cut here: the caller's
//!   replica applies the response limit as for any result); a wait at most the call's
//!   timeout (else [`super::held::QUESTION_TIMEOUT`]) plus [`WAIT_SLACK`].
//! - A waiting request that is cancelled cancels the held call on its holder.
//! - Progress of a call resumed from another replica is not relayed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use rmcp::model::{ElicitRequestParams, ElicitResult};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::held::{Asked, Held, HeldRef, MAX_HELD, new_id};
use super::{UpstreamError, UpstreamReply};
use crate::redis_conn::Redis;

/// The largest answer forwarded to a holder (serialized JSON).
pub const MAX_ANSWER: usize = 64 * 1024;
/// The largest result forwarded back (serialized JSON).
pub const MAX_RESULT: usize = super::connect::MAX_RESPONSE_BYTES;
/// What a waiting replica allows beyond the call's own bound (the holder enforces that).
pub const WAIT_SLACK: Duration = Duration::from_secs(30);

/// One message on a replica's channel.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Message {
    /// To a holder: the answer to the question of `call`; what follows goes to
    /// `reply_to`'s channel for `waiter`.
    Answer {
        server: String,
        call: String,
        answer: ElicitResult,
        reply_to: String,
        waiter: String,
    },
    /// To a holder: the request waiting for `call` was cancelled.
    Cancel { call: String },
    /// To a waiting replica: what became of the call `waiter` waits for.
    Step { waiter: String, step: Wire },
}

/// A held call's next step, as it crosses replicas.
#[derive(Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
enum Wire {
    Asked { question: ElicitRequestParams },
    Done { reply: UpstreamReply },
    Failed { message: String },
}

/// This replica's end of the channels.
pub struct Remote {
    redis: Redis,
    prefix: String,
    /// Requests of this replica waiting for a call held elsewhere, by waiter id.
    waiters: Mutex<HashMap<String, oneshot::Sender<Wire>>>,
    /// Answers from other replicas being handled here, by held call id.
    running: Mutex<HashMap<String, CancellationToken>>,
}

fn channel(prefix: &str, replica: &str) -> String {
    format!("{prefix}:upstream-held:{replica}")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lets `held` take answers from other replicas and forward answers to them, over
/// `redis` (keys under `prefix`), until `shutdown`. The returned end is what
/// [`resume`] forwards through.
pub fn enable(held: &Held, redis: Redis, prefix: &str, shutdown: CancellationToken) -> Arc<Remote> {
    let remote = Arc::new(Remote {
        redis,
        prefix: prefix.to_string(),
        waiters: Mutex::default(),
        running: Mutex::default(),
    });
    let (held, listening) = (held.clone(), remote.clone());
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                result = listen(&held, &listening) => {
                    if let Err(e) = result {
                        tracing::warn!(error = %e, "held upstream questions: Redis subscription lost; retrying");
                    }
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    });
    remote
}

async fn listen(held: &Held, remote: &Arc<Remote>) -> redis::RedisResult<()> {
    let mut messages = remote
        .redis
        .subscribe(&channel(&remote.prefix, held.replica()))
        .await?;
    while let Some(payload) = messages.next().await {
        match serde_json::from_slice::<Message>(&payload) {
            Ok(message) => handle(held, remote, message),
            Err(e) => tracing::warn!(error = %e, "held upstream questions: unreadable message"),
        }
    }
    Err(redis::RedisError::from(std::io::Error::other(
        "subscription closed",
    )))
}

fn handle(held: &Held, remote: &Arc<Remote>, message: Message) {
    match message {
        Message::Step { waiter, step } => {
            if let Some(to) = lock(&remote.waiters).remove(&waiter) {
                let _ = to.send(step);
            }
        }
        Message::Cancel { call } => {
            if let Some(token) = lock(&remote.running).remove(&call) {
                token.cancel();
            }
        }
        Message::Answer {
            server,
            call,
            answer,
            reply_to,
            waiter,
        } => {
            let token = CancellationToken::new();
            let full = {
                let mut running = lock(&remote.running);
                let full = running.len() >= MAX_HELD;
                if !full {
                    running.insert(call.clone(), token.clone());
                }
                full
            };
            let (held, remote) = (held.clone(), remote.clone());
            let to = channel(&remote.prefix, &reply_to);
            tokio::spawn(async move {
                let step = if full {
                    Some(Wire::Failed {
                        message: UpstreamError::TooManyHeld {
                            server: server.clone(),
                            max: MAX_HELD,
                        }
                        .to_string(),
                    })
                } else {
                    tokio::select! {
                        () = token.cancelled() => None,
                        result = held.resume(&server, &call, answer) => Some(wire(result)),
                    }
                };
                if !full {
                    lock(&remote.running).remove(&call);
                }
                let Some(step) = step else {
                    return;
                };
                let text =
                    serde_json::to_string(&Message::Step { waiter, step }).unwrap_or_default();
                if let Err(e) = remote.redis.publish(&to, &text).await {
                    tracing::warn!(error = %e, "held upstream questions: could not send a call's outcome back");
                }
            });
        }
    }
}

/// A held call's step as it crosses: a question stays held here (kept), a result within
/// [`MAX_RESULT`], an error as its text.
fn wire(result: Result<UpstreamReply, UpstreamError>) -> Wire {
    match result {
        Ok(reply) => {
            let size = serde_json::to_string(&reply).map_or(usize::MAX, |t| t.len());
            if size > MAX_RESULT {
                return Wire::Failed {
                    message: format!(
                        "the upstream's result ({size} bytes) is too large to pass between replicas (at most {MAX_RESULT})"
                    ),
                };
            }
            Wire::Done { reply }
        }
        Err(UpstreamError::Asked { asked, .. }) => {
            let (question, _) = asked.keep();
            Wire::Asked { question }
        }
        Err(e) => Wire::Failed {
            message: e.to_string(),
        },
    }
}

/// Forwards `answer` through `remote` (none: this replica has no Redis) to the replica
/// holding `at` and waits for what follows (at most `limit` plus [`WAIT_SLACK`]).
pub async fn resume(
    held: &Held,
    remote: Option<&Arc<Remote>>,
    server: &str,
    at: &HeldRef,
    answer: ElicitResult,
    limit: Option<Duration>,
) -> Result<UpstreamReply, UpstreamError> {
    let unreachable = |reason: String| UpstreamError::HolderUnreachable {
        server: server.into(),
        reason,
    };
    let Some(remote) = remote else {
        return Err(unreachable("this replica has no Redis to reach it".into()));
    };
    let waiter = new_id();
    let (to, step) = oneshot::channel();
    {
        let mut waiters = lock(&remote.waiters);
        if waiters.len() >= MAX_HELD {
            return Err(UpstreamError::TooManyHeld {
                server: server.into(),
                max: MAX_HELD,
            });
        }
        waiters.insert(waiter.clone(), to);
    }
    let _unregister = Unregister(remote.clone(), waiter.clone());
    let message = Message::Answer {
        server: server.into(),
        call: at.call.clone(),
        answer,
        reply_to: held.replica().to_string(),
        waiter,
    };
    let text = serde_json::to_string(&message).unwrap_or_default();
    if text.len() > MAX_ANSWER {
        return Err(UpstreamError::Refused {
            server: server.into(),
            message: format!("the answer is larger than {MAX_ANSWER} bytes"),
        });
    }
    let holder = channel(&remote.prefix, &at.replica);
    let heard = remote
        .redis
        .publish_counted(&holder, &text)
        .await
        .map_err(|e| unreachable(format!("Redis: {:?}", e.kind())))?;
    if heard == 0 {
        return Err(unreachable("it is gone".into()));
    }
    // From here the holder runs the call for this request: cancelled with it.
    let mut cancel = CancelRemote(Some((remote.redis.clone(), holder, at.call.clone())));
    let limit = limit.unwrap_or(super::held::QUESTION_TIMEOUT) + WAIT_SLACK;
    let step = tokio::time::timeout(limit, step).await;
    cancel.0 = None;
    match step {
        Ok(Ok(Wire::Done { reply })) => Ok(reply),
        Ok(Ok(Wire::Asked { question })) => Err(UpstreamError::Asked {
            server: server.into(),
            asked: Box::new(Asked::remote(question, at.clone())),
        }),
        Ok(Ok(Wire::Failed { message })) => Err(UpstreamError::Relayed { message }),
        Ok(Err(_)) => Err(unreachable("it did not answer".into())),
        Err(_) => Err(UpstreamError::Timeout {
            server: server.into(),
            seconds: limit.as_secs_f64(),
        }),
    }
}

/// Drops a waiter's entry however its wait ends.
struct Unregister(Arc<Remote>, String);

impl Drop for Unregister {
    fn drop(&mut self) {
        lock(&self.0.waiters).remove(&self.1);
    }
}

/// Tells the holder to cancel the call when the waiting request is dropped.
struct CancelRemote(Option<(Redis, String, String)>);

impl Drop for CancelRemote {
    fn drop(&mut self) {
        if let Some((redis, holder, call)) = self.0.take() {
            let text = serde_json::to_string(&Message::Cancel { call }).unwrap_or_default();
            tokio::spawn(async move {
                let _ = redis.publish(&holder, &text).await;
            });
        }
    }
}
