"""A real RTSP server for the live tests: GStreamer's gst-rtsp-server (from
Debian's packages; run by the system Python, which has their bindings)
serving one MPEG-TS file at rtsp://127.0.0.1:PORT/cam as MPEG-TS over RTP,
paced by its timestamps, each client from the file's start. Prints
"ready PORT" once listening, or "unavailable: why" and exits 3; ends when
its stdin closes (the test's process is gone) or on SIGTERM.

/usr/bin/python3 tests/gst_rtsp_server.py CLIP.ts [PORT]"""
import signal
import sys


def main():
    path = sys.argv[1]
    port = sys.argv[2] if len(sys.argv) > 2 else "0"      # 0: any free port
    try:
        import gi
        gi.require_version("Gst", "1.0")
        gi.require_version("GstRtspServer", "1.0")
        from gi.repository import GLib, Gst, GstRtspServer
        Gst.init(None)
        missing = [e for e in ("filesrc", "tsparse", "rtpmp2tpay")
                   if Gst.ElementFactory.find(e) is None]
        if missing:
            raise ImportError(f"GStreamer lacks {', '.join(missing)}")
    except (ImportError, ValueError) as e:
        print(f"unavailable: {e}", flush=True)
        sys.exit(3)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    # one pipeline per client, so each starts at the file's first frame
    factory.set_launch(f'( filesrc location="{path}" ! tsparse set-timestamps=true '
                       f'! rtpmp2tpay name=pay0 pt=33 )')
    server.get_mount_points().add_factory("/cam", factory)
    if server.attach(None) == 0:
        print(f"unavailable: cannot listen on 127.0.0.1:{port}", flush=True)
        sys.exit(3)
    loop = GLib.MainLoop()
    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP,
                      lambda *_: loop.quit() or False)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, lambda: loop.quit() or False)
    print(f"ready {server.get_bound_port()}", flush=True)
    loop.run()


if __name__ == "__main__":
    main()
