"""The NVDEC face of a live stream: the live backend's connection, reconnects
and reader thread (_live.py) with OpenCV's FFmpeg demuxing only (raw mode:
Annex B packets, nothing decoded on the host), and PyNvVideoCodec's decoder
turning the packets into NV12 frames in device memory on the caller's stream.

OpenCV demuxes rather than PyNvVideoCodec's own demuxer because the live
backend's guarantees (open and read timeouts, the RTSP transport, reconnects)
are FFmpeg options OpenCV passes and PyNvVideoCodec's demuxer does not take.

A frame's `arrival` is when its packet came off the network: its latency
covers the decoder. The decoder reorders frames (B-frames) and holds one
back until the next packet, unless asked for low latency (streams without
B-frames, as cameras send), so frames are matched to their packets'
arrivals by timestamp. Timestamps restart with each connection; each connection's are
offset by its number times CONNECTION_SPAN so they stay distinct.
"""
import numpy as np

from ._errors import DecodeError
from ._live import LiveDecoder
from ._nvdec import import_nvc

# FFmpeg's fourcc of a stream -> PyNvVideoCodec's cudaVideoCodec member name
_CODECS = {"h264": "H264", "avc1": "H264", "hevc": "HEVC", "hev1": "HEVC", "hvc1": "HEVC",
           "av01": "AV1", "vp09": "VP9", "vp80": "VP8"}
_US = 1_000_000                      # packet timestamps go to NVDEC in microseconds
CONNECTION_SPAN = 10 ** 12           # microseconds (11.6 days) between connections' timestamps
_ANNEX_B = (b"\x00\x00\x01", b"\x00\x00\x00\x01")


class LiveNvdecDecoder(LiveDecoder):
    """A network stream demuxed by OpenCV's FFmpeg in the reader thread and
    decoded by NVDEC in the consumer, on `stream`: frames are the decoder's
    device planes, valid until the next frame is taken."""

    name = "nvdec"

    def __init__(self, source, stream, grey, open_timeout, stall_timeout, max_reconnects,
                 rtsp_transport=None, low_latency=False):
        nvc = self.nvc = import_nvc()
        import cv2
        self.capture_options = ((cv2.CAP_PROP_FORMAT, -1),)      # packets, not pictures
        super().__init__(source, grey, 1, open_timeout, stall_timeout, max_reconnects,
                         rtsp_transport)
        try:
            self.nv_codec = self._check_codec(stream.device)
            # low latency: each picture handed out once decoded, in decode order,
            # which is display order only for streams without B-frames
            latency = {"latency": nvc.DisplayDecodeLatencyType.LOW} if low_latency else {}
            self.decoder = nvc.CreateDecoder(gpuid=stream.device, codec=self.nv_codec,
                                             cudacontext=0, cudastream=stream.handle,
                                             usedevicememory=True, **latency)
        except Exception as e:
            self.cap.release()
            if isinstance(e, DecodeError):
                raise
            raise DecodeError(f"NVDEC cannot decode {self.codec} {self.width}x{self.height}: "
                              f"{e}") from None
        self.stream, self.low_latency = stream, low_latency
        self._last_decoded_pts = None    # low latency: the last packet's, in decode order
        # packets queued ahead of the decoder: a burst of the network is
        # absorbed here, not in the socket
        self._ready.maxsize = 16
        self._arrivals = {}              # offset timestamp -> its packet's arrival
        self._connection = -1            # connections whose packets NVDEC has seen, minus 1
        self._lost_connection = None     # the connection of the last frame counted for losses
        self._shape = None

    def _check_codec(self, device):
        """The stream's cudaVideoCodec, or DecodeError saying why NVDEC cannot
        decode it (codec, or size on this GPU; 8-bit 4:2:0 is assumed, as
        cameras send)."""
        nvc, what = self.nvc, f"{self.codec} {self.width}x{self.height}"
        member = _CODECS.get((self.codec or "").lower())
        if member is None:
            raise DecodeError(f"NVDEC does not decode {self.codec or 'an unknown codec'} "
                              f"streams (it takes {', '.join(sorted(set(_CODECS.values())))})")
        codec = getattr(nvc.cudaVideoCodec, member)
        try:
            # the enum's 4:2:0 member (its name differs between releases)
            chroma = next(v for k, v in nvc.cudaVideoChromaFormat.__members__.items()
                          if "420" in k)
            caps = nvc.GetDecoderCaps(gpuid=device, codec=codec, chromaformat=chroma,
                                      bitdepth=8)
        except Exception as e:
            raise DecodeError(f"NVDEC cannot be queried for {what}: {e}") from None
        if not caps.get("supported", 0):
            raise DecodeError(f"NVDEC on device {device} does not decode {what}")
        if not (caps.get("width_min", 0) <= self.width <= caps.get("width_max", 1 << 30)
                and caps.get("height_min", 0) <= self.height <= caps.get("height_max", 1 << 30)):
            raise DecodeError(f"NVDEC on device {device} does not decode {what}: sizes from "
                              f"{caps.get('width_min')}x{caps.get('height_min')} to "
                              f"{caps.get('width_max')}x{caps.get('height_max')}")
        return codec

    # ---- the reader thread: packets ---------------------------------------------------------

    def _item(self, image, index, arrival, fresh):
        """One packet, copied out of OpenCV's buffer (which the next read
        reuses). A connection's first packet carries the stream's parameter
        sets first where FFmpeg keeps them apart (RTSP's SDP), in Annex B."""
        data = image.reshape(-1)
        if fresh:
            extra = self._extradata()
            if extra is not None:
                data = np.concatenate([extra, data])
        cv2 = self.cv2
        msec = self.cap.get(cv2.CAP_PROP_POS_MSEC)
        pts = round(msec * 1000) if msec >= 0 else None
        key = bool(self.cap.get(cv2.CAP_PROP_LRF_HAS_KEY_FRAME))
        return np.array(data, np.uint8, copy=True), pts, key, arrival, fresh

    def _extradata(self):
        cv2 = self.cv2
        ok, extra = self.cap.retrieve(flag=int(self.cap.get(cv2.CAP_PROP_CODEC_EXTRADATA_INDEX)))
        if not ok or extra is None or extra.size == 0:
            return None
        extra = extra.reshape(-1)
        # avcC/hvcC (MP4-style) extradata: FFmpeg's filter already put it in the packets
        return extra if bytes(extra[:4]).startswith(_ANNEX_B) else None

    # ---- the consumer: NVDEC ----------------------------------------------------------------

    def _frames_of(self, item):
        data, pts, key, arrival, fresh = item
        nvc = self.nvc
        packet = nvc.PacketData()
        if fresh:
            self._connection += 1
            self._last_decoded_pts = None
            if self._connection > 0:     # a new connection: the parser starts over
                packet.decode_flag = nvc.VideoPacketFlag.DISCONTINUITY
        if self.low_latency:
            self._check_order(pts, key)
            if not (fresh and self._connection > 0):
                packet.decode_flag = nvc.VideoPacketFlag.ENDOFPICTURE   # decode it now
        base = self._connection * CONNECTION_SPAN
        if pts is not None:
            packet.pts = base + pts
            self._arrivals[base + pts] = arrival
        packet.bsl_data = data.ctypes.data   # `data` outlives Decode, which parses it
        packet.bsl = data.size
        try:
            decoded = self.decoder.Decode(packet)
        except Exception as e:
            raise DecodeError(f"{self.source}: NVDEC failed ({self.codec} {self.width}x"
                              f"{self.height}): {e}") from None
        # a frame's buffers are reused by the next Decode: each is handed out
        # before it is called
        for frame in decoded:
            yield self._frame(frame, arrival)

    def _check_order(self, pts, key):
        """Low latency hands frames out in decode order: a packet earlier in
        display order than the one before it (a B-frame) ends the stream
        rather than give frames out of order. A key frame may start the
        timestamps over (a looped source, a wrap)."""
        last, self._last_decoded_pts = self._last_decoded_pts, pts
        if pts is not None and last is not None and pts < last and not key:
            raise DecodeError(f"{self.source}: the stream has B-frames (its pictures come out "
                              f"of order); low latency decoding needs a stream without them, "
                              f"as most cameras send: read it without low latency")

    def _frame(self, frame, arrival):
        """A decoded frame's planes and timestamp (seconds within its
        connection); its arrival is its packet's, found by timestamp (the
        current packet's where the stream has none)."""
        luma, chroma = frame.cuda()[:2]
        shape = tuple(luma.__cuda_array_interface__["shape"][:2])
        if self._shape is None:
            self._shape = shape
            self.height, self.width = shape
        elif shape != self._shape:
            raise DecodeError(f"{self.source}: a frame is {shape[1]}x{shape[0]}, the first "
                              f"was {self._shape[1]}x{self._shape[0]}")
        stamp = frame.getPTS()
        if stamp not in self._arrivals:          # a stream without timestamps
            self.arrival = arrival
            return luma, chroma, None, None
        self.arrival = self._arrivals.pop(stamp)
        # arrivals of packets that gave no frame of their own (a dropped
        # picture): never matched, forgotten once well behind
        if len(self._arrivals) > 64:
            for old in sorted(self._arrivals)[:-32]:
                del self._arrivals[old]
        connection, pts = divmod(stamp, CONNECTION_SPAN)
        self._count_lost(pts / _US, connection != self._lost_connection)
        self._lost_connection = connection
        return luma, chroma, None, pts / _US

    def close(self):
        super().close()
        self.decoder = None              # after the thread: it owns the frame buffers
