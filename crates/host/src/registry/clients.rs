//! Registry clients kept for the gateway's life, one per registry, scheme, timeout and
//! credentials. A client loads the system's root certificates when it is made (most of a
//! reload's time, were one made per reference), and keeps its connections and the tokens a
//! registry hands out; new credentials (a rotated Secret) get a new client.

use std::collections::HashMap;
use std::time::Duration;

use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use parking_lot::Mutex;

/// The clients, by what makes one differ.
#[derive(Default)]
pub struct Clients(Mutex<HashMap<Key, Client>>);

/// A registry, whether it is spoken to over plain HTTP, the timeout, and the credentials.
type Key = (String, bool, Duration, Option<(String, String)>);

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.0.lock().len();
        f.debug_struct("Clients").field("count", &count).finish()
    }
}

impl Clients {
    /// The client for `reference`'s registry: the one made before for the same settings,
    /// or a new one ([`super::client`]).
    pub(crate) fn get(
        &self,
        reference: &Reference,
        insecure: bool,
        timeout: Duration,
        auth: &RegistryAuth,
    ) -> Client {
        let credentials = match auth {
            RegistryAuth::Anonymous => None,
            RegistryAuth::Basic(user, password) => Some((user.clone(), password.clone())),
            RegistryAuth::Bearer(token) => Some((String::new(), token.clone())),
        };
        let key = (reference.resolve_registry().to_owned(), insecure, timeout, credentials);
        let mut clients = self.0.lock();
        clients
            .entry(key)
            .or_insert_with(|| super::client(reference, insecure, Some(timeout)))
            .clone()
    }
}
