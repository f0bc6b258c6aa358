//! The Orbit client SDK, usable without compiling the server.
//!
//! # Layout
//!
//! - [`client`]: the HTTP API client (tasks, attempts, queues) and its error type.
//! - [`protocol`]: the worker WebSocket frames and the checks every assignment must pass
//!   (a keyed task carries a token and vice versa, tokens are non-zero decimal `u64` strings, a
//!   keyed task's `key_slot` is an integer and defaults to 0, a repeated assignment never changes
//!   its key, token or slot).
//! - [`worker`]: [`Worker`], which says hello with `concurrency_keys: true`, starts each task before
//!   its handler runs, renews leases, reports results, reconnects with `resume`, and drains; it
//!   cancels a handler whose lease was lost ([`TaskContext::cancelled`], [`Cancellation`]).
//! - [`fence`]: the resource-side [`Fence`] that rejects stale writes by token, in memory or in
//!   MySQL/MariaDB (feature `mysql`); for a key several attempts hold at once, a register per
//!   [`TaskContext::key_slot`] ([`FenceWrite::in_slot`], [`Fence::read_slot`]).
//! - [`credentials`]: reads the credentials file `orbit admin bootstrap` writes.

pub mod client;
pub mod credentials;
pub mod fence;
pub mod protocol;
pub mod worker;

pub use client::{ApiError, Client};
pub use fence::{Fence, FenceDecision, FenceError, FenceWrite, InMemoryFence};
pub use protocol::ProtocolError;
pub use worker::{Cancellation, HandlerError, TaskContext, Worker, WorkerHandle};
