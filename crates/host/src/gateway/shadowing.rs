//! A split route's shadow, sent from the gateway: after the primary answered, a copy of the
//! request goes to the shadow target on its own task, within the route's `concurrency` and
//! `timeout`, and the two answers are compared ([`crate::route::shadow`]). The client never
//! waits for it.

use std::sync::Arc;

use edgegate_runtime::{Forward, GuestOutcome, GuestRequest, RequestId};
use http::{HeaderValue, Response};
use http_body_util::{BodyExt, Either, Full};

use super::snapshot::{Action, Snapshot};
use super::streamed::{Held, Streamed};
use super::{Gateway, ResponseBody};
use crate::listen::conn::ConnInfo;
use crate::route::shadow::{Digested, Shadow};

/// The most of a shadow's response body read for its hash; a longer one is a shadow error.
const SHADOW_BODY_CAP: usize = 16 << 20;

/// A request to shadow, and where.
pub(super) struct Shadowing {
    action: Action,
    shadow: Arc<Shadow>,
    /// The shadow's place under the route's `concurrency`.
    place: tokio::sync::OwnedSemaphorePermit,
    request: GuestRequest,
}

impl Shadowing {
    /// The shadow of `request` to `action`, if the shadow's methods include it and the route
    /// has a place for it under its `concurrency`: a copy marked as a shadow.
    pub(super) fn of(
        request: &GuestRequest,
        action: &Action,
        shadow: &Arc<Shadow>,
    ) -> Option<Self> {
        let place = shadow.place(&request.method, request.body.len())?;
        let mut copy = request.clone();
        copy.headers.insert(crate::route::shadow::MARKER, HeaderValue::from_static("1"));
        Some(Self { action: action.clone(), shadow: shadow.clone(), place, request: copy })
    }
}

impl Gateway {
    /// Starts the shadow of a request whose primary answered `response`, and returns the
    /// response, its body tapped for the comparison. The shadow runs on its own task.
    pub(super) async fn shadow(
        &self,
        shadowing: Shadowing,
        response: Response<ResponseBody>,
        conn: ConnInfo,
        id: RequestId,
        snapshot: Arc<Snapshot>,
    ) -> Response<ResponseBody> {
        let Shadowing { action, shadow, place, request } = shadowing;
        let (parts, body) = response.into_parts();
        let (done, primary_body) = tokio::sync::oneshot::channel();
        let body = match body {
            // A worker's answer is whole already: hashed now.
            Either::Left(full) => {
                let bytes = full.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
                let _ = done.send(digest.as_ref().try_into().unwrap_or([0; 32]));
                Either::Left(Full::new(bytes))
            }
            Either::Right(mut streamed) => {
                streamed.tap(done);
                Either::Right(streamed)
            }
        };
        let status = parts.status.as_u16();
        let primary_headers = parts.headers.clone();
        let slot = match &action {
            // A worker's shadow takes an instance slot if one is free, never waiting.
            Action::Worker(_) => match self.permits.clone().try_acquire_owned() {
                Ok(slot) => Some(slot),
                Err(_) => {
                    shadow.count(crate::route::shadow::Outcome::Skipped);
                    return Response::from_parts(parts, body);
                }
            },
            _ => None,
        };
        tokio::spawn(async move {
            let _held = (place, slot);
            let answered = tokio::time::timeout(shadow.timeout, async {
                let response = shadow_answer(&action, request, conn, id, &snapshot).await?;
                let (head, body) = response.into_parts();
                let digest = crate::route::shadow::digest_of(body, SHADOW_BODY_CAP).await?;
                Some(shadow.seen(head.status.as_u16(), &head.headers, digest))
            })
            .await;
            let Ok(Some(seen)) = answered else {
                return shadow.count(crate::route::shadow::Outcome::ShadowError);
            };
            // The client went away before the primary's body ended: nothing to compare.
            let Ok(digest) = primary_body.await else {
                return shadow.count(crate::route::shadow::Outcome::Skipped);
            };
            let primary = shadow.seen(status, &primary_headers, digest);
            shadow.judge(&primary, &seen, &id.to_string());
        });
        Response::from_parts(parts, body)
    }
}

/// The shadow target's answer to `request`: a worker's (or the upstream it forwards to), or
/// an upstream's; `None` when it failed.
async fn shadow_answer(
    action: &Action,
    request: GuestRequest,
    conn: ConnInfo,
    id: RequestId,
    snapshot: &Snapshot,
) -> Option<Response<ResponseBody>> {
    let trust = snapshot.server.trust_forwarded;
    let forward = match action {
        Action::Upstream(target) => {
            let upstream = target.upstream.name().to_owned();
            let forward = Forward { upstream, edits: Vec::new(), request };
            let response = target.upstream.send(forward, conn, trust).await.ok()?;
            return Some(
                response.map(|body| Either::Right(Digested::new(Streamed::upstream(body)))),
            );
        }
        Action::Worker(target) => match target.worker.handle_measured(request, id).await.0.ok()? {
            GuestOutcome::Response(response) => {
                return Some(response.map(|b| Either::Left(Full::new(b))));
            }
            // The shadow's task holds its slot until the body is read.
            GuestOutcome::Streamed(response, progress) => {
                let streamed = |body| Streamed::guest(body, Held::default(), progress);
                let body = |body| Either::Right(Digested::new(streamed(body)));
                return Some(response.map(body));
            }
            GuestOutcome::Forward(forward) => (snapshot.granted(target, &forward).ok()?, forward),
        },
        Action::Respond(_) | Action::Split(_) => return None,
    };
    let (upstream, forward) = forward;
    let response = upstream.send(forward, conn, trust).await.ok()?;
    Some(response.map(|body| Either::Right(Digested::new(Streamed::upstream(body)))))
}
