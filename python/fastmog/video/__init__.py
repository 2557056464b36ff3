"""fastmog.video: the frames of a video, decoded by NVDEC on the GPU or by
FFmpeg on the host, behind one reader.

VideoReader (_reader) picks a backend and hands out VideoFrame records; every
backend follows the one interface in _backend: the host's (_host), NVDEC with
one session (_nvdec) or several over one file (_nvdec_sessions). DecodeError
(_errors) is the one error they raise.
"""
from ._errors import DecodeError
from ._reader import VideoFrame, VideoReader

__all__ = ["DecodeError", "VideoFrame", "VideoReader"]
