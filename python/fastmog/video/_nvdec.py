"""The NVDEC backend of VideoReader, one session: PyNvVideoCodec's demuxer
and decoder, NV12 frames left in device memory."""
import os

from .. import _fastmog
from ._backend import open_interruptibly
from ._errors import DecodeError, truncated


def import_nvc():
    """PyNvVideoCodec, or a DecodeError naming the most basic reason it is not usable."""
    if not _fastmog.cuda_available():
        raise DecodeError(f"no usable GPU ({_fastmog._cuda_status()[0]})")
    try:
        import PyNvVideoCodec as nvc
    except Exception as e:                   # missing, or no driver/libnvcuvid
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DecodeError(f"PyNvVideoCodec is not usable ({why}): "
                          f"pip install 'fastmog[nvdec]'") from None
    return nvc


def _quietly(create_demuxer, source):
    """PyNvVideoCodec's demuxer, opened with FFmpeg's own log lines (probe
    warnings of a file it cannot read) kept out of the user's terminal. Only
    for regular files, which open at once: fd 2 is the process's, and a stream
    that blocks must not leave it silenced."""
    if not os.path.isfile(source):
        return create_demuxer(filename=source)
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        return create_demuxer(filename=source)
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _container_metadata(source):
    """(frames declared, frame rate) of a regular file's container, through
    OpenCV's metadata: (0, None) where unknown. Streams are not probed:
    opening them twice would consume their data."""
    if not os.path.isfile(source):
        return 0, None
    try:
        import cv2
    except ImportError:
        return 0, None
    cap = cv2.VideoCapture(os.fsencode(source))  # bytes: any file name works
    try:
        if not cap.isOpened():
            return 0, None
        fps = cap.get(cv2.CAP_PROP_FPS)
        return max(int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), 0), (fps if fps > 0 else None)
    finally:
        cap.release()


def _stream_time_base(source):
    """The video stream's time base (seconds per pts unit) from the container,
    through PyAV where it is installed, for PyNvVideoCodec builds whose demuxer
    does not report it: without it NVDEC frames have no timestamps, and a
    reader cannot see frames missing in the middle. None where unknown."""
    if not os.path.isfile(source):
        return None
    try:
        import av
    except Exception:                        # not installed, or its FFmpeg does not load
        return None
    try:
        with av.open(os.fsdecode(source)) as container:
            base = container.streams.video[0].time_base
            return float(base) if base else None
    except Exception:                        # PyAV's errors are many; the answer is "unknown"
        return None


def _codec_name(codec):
    return str(codec).rsplit(".", 1)[-1]


class NvdecDecoder:
    """PyNvVideoCodec's demuxer and decoder: NV12 in device memory, the output
    copy queued on the caller's stream."""

    name = "nvdec"

    def __init__(self, source, stream, device, open_timeout, decoder=True):
        nvc = self.nvc = import_nvc()
        self.source = source
        try:
            os.fsdecode(source).encode("utf-8")
        except UnicodeEncodeError:
            # PyNvVideoCodec takes the name as UTF-8 text; the host backend takes bytes
            raise DecodeError("the file name is not UTF-8") from None
        try:
            self.demuxer = open_interruptibly(lambda: _quietly(nvc.CreateDemuxer, source),
                                               open_timeout, source)
        except DecodeError:
            raise
        except Exception as e:  # PyNvVCException derives from Exception alone
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [repr(e)]
            why = next((ln for ln in lines if "returned error" in ln), lines[0])
            raise DecodeError(f"cannot read video {source}: {why}") from None
        dmx = self.demuxer
        self.width, self.height = int(dmx.Width()), int(dmx.Height())
        self.codec = _codec_name(dmx.GetNvCodecId())
        what = f"{self.codec} {self.width}x{self.height}"
        bit_depth = int(dmx.BitDepth()) if hasattr(dmx, "BitDepth") else 8
        if bit_depth != 8:
            raise DecodeError(f"{source}: {what} is {bit_depth}-bit; fastmog takes 8-bit video")
        try:
            caps = nvc.GetDecoderCaps(gpuid=device, codec=dmx.GetNvCodecId(),
                                      chromaformat=dmx.ChromaFormat(), bitdepth=bit_depth)
        except Exception as e:
            raise DecodeError(f"NVDEC cannot be queried for {what}: {e}") from None
        if not caps.get("supported", 0):
            raise DecodeError(f"NVDEC on device {device} does not decode {what} "
                              f"({_codec_name(dmx.ChromaFormat())} chroma)")
        if not (caps.get("width_min", 0) <= self.width <= caps.get("width_max", 1 << 30)
                and caps.get("height_min", 0) <= self.height <= caps.get("height_max", 1 << 30)
                and (self.width // 16) * (self.height // 16) <= caps.get("mb_num_max", 1 << 30)):
            raise DecodeError(f"NVDEC on device {device} does not decode {what}: {self.codec} "
                              f"sizes from {caps.get('width_min')}x{caps.get('height_min')} to "
                              f"{caps.get('width_max')}x{caps.get('height_max')}")
        self.engines = caps.get("num_decoder_engines")
        self.device = device
        self.decoder = self.new_decoder(stream) if decoder else None
        tb_num = getattr(dmx, "GetTimebaseNum", lambda: 0)()
        tb_den = getattr(dmx, "GetTimebaseDen", lambda: 0)()
        self.time_base = tb_num / tb_den if tb_num and tb_den else _stream_time_base(source)
        self.declared, self.fps = _container_metadata(source)

    def new_decoder(self, stream):
        """A decoder session for this video whose output copies go on `stream`."""
        try:
            return self.nvc.CreateDecoder(gpuid=self.device, codec=self.demuxer.GetNvCodecId(),
                                          cudacontext=0, cudastream=stream.handle,
                                          usedevicememory=True)
        except Exception as e:
            raise DecodeError(f"NVDEC cannot decode {self.codec} {self.width}x{self.height}: "
                              f"{e}") from None

    def _decode(self, packet, index):
        try:
            return self.decoder.Decode(packet)
        except Exception as e:
            raise DecodeError(f"{self.source}: NVDEC failed at frame {index} ({self.codec} "
                              f"{self.width}x{self.height}): {e}", frame_index=index) from None

    def frames(self):
        index, packets, last_size = 0, 0, 0
        demuxed = iter(self.demuxer)
        while True:
            try:
                packet = next(demuxed)
            except StopIteration:
                break
            except Exception as e:
                raise DecodeError(f"{self.source}: demuxing failed at frame {index}: {e}",
                                  frame_index=index) from None
            last_size = int(packet.bsl)
            packets += last_size > 0
            # The frames of one Decode() live in buffers the next Decode() reuses:
            # they are handed out one by one before it is called.
            for frame in self._decode(packet, index):
                yield self._planes(frame) + (None, self._time(frame))
                index += 1
        if last_size:                        # the demuxer gave no empty packet: flush
            for frame in self._decode(self.nvc.PacketData(), index):
                yield self._planes(frame) + (None, self._time(frame))
                index += 1
        expected = max(packets, self.declared)
        if index < expected:
            raise truncated(self.source, index, expected)

    @staticmethod
    def _planes(frame):
        # Plane 0 is [H, W, 1], plane 1 [H/2, W/2, 2], both |u1 with lists for
        # shape and strides. Their CAI "stream" is 2 (CAI: per-thread default
        # stream) whenever the decoder has a stream, 0 otherwise: never the
        # decoder's stream. The ordering comes from decoding on the caller's stream.
        planes = frame.cuda()
        return planes[0], planes[1]

    def _time(self, frame):
        pts = frame.getPTS()
        return pts * self.time_base if self.time_base is not None else None

    def close(self):
        # decoder first: it owns the frame buffers and runs on the caller's stream
        self.decoder = None
        self.demuxer = None


