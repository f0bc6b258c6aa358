//! A raw WebSocket client for protocol-level tests (the SDK is tested separately).

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// A client WebSocket to the server.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens `/v1/workers/connect` on the server at `base_url` with a bearer token.
pub async fn connect_socket(base_url: &str, token: &str) -> Socket {
    let url = format!(
        "{}/v1/workers/connect",
        base_url.replacen("http://", "ws://", 1)
    );
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (socket, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("websocket connect");
    socket
}

pub struct RawWorker {
    socket: Socket,
}

impl RawWorker {
    pub async fn connect(base_url: &str, token: &str) -> RawWorker {
        RawWorker {
            socket: connect_socket(base_url, token).await,
        }
    }

    pub async fn send(&mut self, frame: Value) {
        self.socket
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
    }

    /// The next text frame (waits at most 20 s).
    pub async fn recv(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(20), self.socket.next())
                .await
                .expect("a frame within 20 s")
                .expect("socket open")
                .expect("frame");
            if let Message::Text(t) = msg {
                return serde_json::from_str(&t).unwrap();
            }
        }
    }

    /// The next frame of `kind`, skipping others (returned in the second value).
    pub async fn recv_type(&mut self, kind: &str) -> Value {
        loop {
            let f = self.recv().await;
            if f["type"] == kind {
                return f;
            }
            assert_ne!(
                f["type"], "error",
                "unexpected error frame while waiting for {kind}: {f}"
            );
        }
    }

    pub async fn hello(
        &mut self,
        worker_id: &str,
        queues: &[&str],
        keys: bool,
        capacity: u32,
        resume: &[u64],
    ) -> Value {
        self.send(json!({"type": "hello", "worker_id": worker_id, "capacity": capacity, "queue_ids": queues,
                         "handlers": [], "concurrency_keys": keys, "resume": resume}))
            .await;
        self.recv().await
    }

    /// A hello of a `start_on_assign` session with concurrency keys on `queues`: its
    /// assignments arrive started.
    pub async fn hello_started(
        &mut self,
        worker_id: &str,
        queues: &[&str],
        capacity: u32,
    ) -> Value {
        self.send(json!({"type": "hello", "worker_id": worker_id, "capacity": capacity, "queue_ids": queues,
                         "concurrency_keys": true, "start_on_assign": true}))
            .await;
        self.recv().await
    }

    /// Reads until the server's Close frame and returns its code; panics when the socket ends
    /// without one (a client would see 1006) or nothing comes within 20 s.
    pub async fn recv_close(&mut self) -> u16 {
        loop {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(20), self.socket.next())
                .await
                .expect("a Close frame within 20 s")
                .expect("a Close frame before the socket ends (not 1006)")
                .expect("a Close frame, not a broken connection (1006)");
            if let Message::Close(frame) = msg {
                return frame.expect("the Close frame has a code").code.into();
            }
        }
    }

    /// Whether the server ends the connection (within 20 s) without sending another text frame.
    pub async fn closed(&mut self) -> bool {
        loop {
            match tokio::time::timeout(std::time::Duration::from_secs(20), self.socket.next())
                .await
                .expect("the server closes within 20 s")
            {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return true,
                Some(Ok(Message::Text(_))) => return false,
                Some(Ok(_)) => continue,
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}
