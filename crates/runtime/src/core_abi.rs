//! edgegate's own ABI for core modules (`edgegate_v1`): one request through a fresh instance
//! ([`request`]), the host functions it imports ([`hostcalls`]), and its outcome decoded
//! ([`outcome`]). The other ABI, standard `wasi:http` components, is
//! [`component`](crate::component).

pub(crate) mod hostcalls;
pub(crate) mod outcome;
pub(crate) mod request;
