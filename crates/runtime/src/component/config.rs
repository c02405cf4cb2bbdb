//! `wasi:config/store@0.2.0-rc.1` over the worker's `config` table: the values a module reads
//! with `config_get` and `config_all`, read-only, the same for every request.

use super::bindings::config::store::{Error, Host};
use super::state::ComponentState;

impl Host for ComponentState {
    fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<String>, Error>> {
        Ok(Ok(self.worker.config.get(&key).cloned()))
    }

    fn get_all(&mut self) -> wasmtime::Result<Result<Vec<(String, String)>, Error>> {
        let config = &self.worker.config;
        Ok(Ok(config.iter().map(|(key, value)| (key.clone(), value.clone())).collect()))
    }
}
