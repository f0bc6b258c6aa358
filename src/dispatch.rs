//! Wake-ups of this process's worker sessions. The HTTP handlers and worker sessions signal
//! where work appeared, and the scheduler's probe signals work other processes made ready; both
//! depend on this module, never on each other.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use tokio::sync::{broadcast, watch};

/// Wakes the worker sessions of this process when there may be new work, only those that serve
/// the queues concerned: a submit here (its queue), a release, cancel or resolve here (the queues
/// where the procedure reports it readied work), or ready queues seen by the scheduler's probe
/// (work from other processes, recovered leases, due retries). One application's changes never
/// wake another application's sessions (their queues differ). A watch channel holding the last
/// [`WAKE_HISTORY`] wake-ups, so a session busy with a frame when several fire still sees each.
#[derive(Debug)]
pub struct Dispatch {
    work: watch::Sender<Wake>,
    cancels: broadcast::Sender<Cancel>,
}

/// An attempt the server ended while its worker held it (a key policy's `cancel_running`): the
/// session holding it sends `task.cancel`. Sessions of other processes are not told; their
/// worker learns at its next renewal, which is refused.
#[derive(Clone, Debug)]
pub struct Cancel {
    pub session_id: u64,
    pub attempt_id: u64,
}

/// Cancellations a session can fall behind by before it misses some (it then relies on the
/// renewal's refusal, as sessions of other processes do).
pub const CANCEL_BACKLOG: usize = 1024;

/// How many recent wake-ups a session can catch up on; one that fell further behind claims once.
pub const WAKE_HISTORY: usize = 256;

/// The recent wake-ups: each a generation and the queues that may have work.
#[derive(Clone, Debug, Default)]
pub struct Wake {
    pub generation: u64,
    recent: Arc<VecDeque<(u64, Arc<HashSet<String>>)>>,
}

impl Wake {
    /// Whether a session consuming `queues`, which last looked at generation `seen`, should try
    /// to claim: a wake-up since then named one of its queues (or it missed some).
    pub fn concerns(&self, seen: u64, queues: &[String]) -> bool {
        if self.generation <= seen {
            return false;
        }
        match self.recent.front() {
            Some((oldest, _)) if *oldest <= seen + 1 => self
                .recent
                .iter()
                .filter(|(g, _)| *g > seen)
                .any(|(_, ready)| queues.iter().any(|q| ready.contains(q))),
            _ => true,
        }
    }
}

impl Default for Dispatch {
    fn default() -> Self {
        Dispatch {
            work: watch::channel(Wake::default()).0,
            cancels: broadcast::channel(CANCEL_BACKLOG).0,
        }
    }
}

impl Dispatch {
    /// Work appeared on these queues.
    pub fn notify_queues(&self, queues: HashSet<String>) {
        if queues.is_empty() {
            return;
        }
        let queues = Arc::new(queues);
        self.work.send_modify(|w| {
            w.generation += 1;
            // In place unless a session is reading the history right now.
            let recent = Arc::make_mut(&mut w.recent);
            if recent.len() == WAKE_HISTORY {
                recent.pop_front();
            }
            recent.push_back((w.generation, queues));
        });
    }

    pub fn subscribe(&self) -> watch::Receiver<Wake> {
        self.work.subscribe()
    }

    /// Tells the session holding `attempt_id`, if it is one of this process's, that the server
    /// ended it.
    pub fn cancel_attempt(&self, session_id: u64, attempt_id: u64) {
        // No receiver (no session here) is not an error.
        let _ = self.cancels.send(Cancel {
            session_id,
            attempt_id,
        });
    }

    pub fn subscribe_cancels(&self) -> broadcast::Receiver<Cancel> {
        self.cancels.subscribe()
    }
}
