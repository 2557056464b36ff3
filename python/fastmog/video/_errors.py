"""The video wing's one error, DecodeError, and how a stream cut short is named."""


class DecodeError(ValueError):
    """A video that cannot be decoded as asked: a source that does not open, a
    codec or size NVDEC cannot do (named), or a stream that breaks mid-file
    (`frame_index` is the first frame that could not be decoded; every frame
    before it was delivered)."""

    def __init__(self, message, *, frame_index=None):
        super().__init__(message)
        self.frame_index = frame_index


def truncated(source, index, declared):
    """The DecodeError of a stream that ended at frame `index` of `declared`."""
    return DecodeError(f"{source}: frame {index} could not be decoded (the file declares "
                       f"{declared} frames): the stream is truncated or corrupt",
                       frame_index=index)
