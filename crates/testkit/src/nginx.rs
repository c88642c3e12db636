//! nginx as the black-box tests and benchmarks run it: a configuration of a reverse proxy
//! in front of one upstream, every path it writes inside a directory of its own.

use std::path::{Path, PathBuf};

/// Writes `dir/nginx.conf`: `workers` worker processes on 127.0.0.1:`front`, in the
/// foreground, proxying every path to 127.0.0.1:`back` over kept-alive HTTP/1.1
/// connections (`keepalive` idle ones each), with its pid file, error log and temporary
/// files in `dir`; returns its path.
pub fn reverse_proxy_conf(
    dir: &Path,
    workers: u32,
    front: u16,
    back: u16,
    keepalive: u32,
) -> std::io::Result<PathBuf> {
    let conf = dir.join("nginx.conf");
    let d = dir.display();
    std::fs::write(
        &conf,
        format!(
            "worker_processes {workers}; daemon off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
               fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
               upstream app {{ server 127.0.0.1:{back}; keepalive {keepalive}; }}\n\
               server {{ listen 127.0.0.1:{front};\n\
                 location / {{ proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; }} }} }}\n"
        ),
    )?;
    Ok(conf)
}
