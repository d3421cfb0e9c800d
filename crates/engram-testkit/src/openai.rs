//! A real HTTP server on loopback that speaks just enough of the OpenAI Chat Completions
//! protocol for judge tests: each request's JSON body goes to a script that decides the reply;
//! every body and `Authorization` header is recorded. One thread per connection, so concurrent
//! clients and slow replies behave as with a real server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// What the server sends back.
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// Extra header lines (`Name: value`).
    pub headers: Vec<String>,
    /// The body.
    pub body: String,
}

impl Reply {
    /// A 200 with a chat completion whose message is `content`.
    pub fn completion(content: &str) -> Self {
        let body = serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": content}}]
        });
        Self::status(200, &body.to_string())
    }

    /// Any status with a body.
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}

type Script = dyn Fn(&Value) -> Reply + Send + Sync;

/// The running server (it lives as long as the test process).
pub struct Server {
    /// Base URL, `http://127.0.0.1:PORT/v1`.
    pub url: String,
    /// Every request body, in arrival order.
    pub bodies: Arc<Mutex<Vec<Value>>>,
    /// Every `Authorization` header line.
    pub auth: Arc<Mutex<Vec<String>>>,
    /// Connections accepted.
    pub hits: Arc<AtomicUsize>,
}

impl Server {
    /// Starts a server answering each request with `script(body)`.
    pub fn start(script: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let server = Self {
            url,
            bodies: Arc::default(),
            auth: Arc::default(),
            hits: Arc::default(),
        };
        let script: Arc<Script> = Arc::new(script);
        let (bodies, auth, hits) = (
            server.bodies.clone(),
            server.auth.clone(),
            server.hits.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                hits.fetch_add(1, Ordering::SeqCst);
                let (script, bodies, auth) = (script.clone(), bodies.clone(), auth.clone());
                std::thread::spawn(move || serve(stream, &*script, &bodies, &auth));
            }
        });
        server
    }

    /// The request bodies so far.
    pub fn requests(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: TcpStream,
    script: &Script,
    bodies: &Mutex<Vec<Value>>,
    auth: &Mutex<Vec<String>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut len = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let lower = l.to_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
        if lower.starts_with("authorization:") {
            auth.lock().unwrap().push(l.to_string());
        }
    }
    let mut body = vec![0; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let req: Value = serde_json::from_slice(&body).unwrap();
    bodies.lock().unwrap().push(req.clone());
    let reply = script(&req);
    let headers: String = reply.headers.iter().map(|h| format!("{h}\r\n")).collect();
    let _ = write!(
        stream,
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{}",
        reply.status,
        reply.body.len(),
        reply.body
    );
}
