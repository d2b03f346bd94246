"""What every windowed DStream shares: a window and a slide that are multiples of the parent's
slide, and a parent that must remember its RDDs for one window longer (Spark's ``WindowedDStream``
and ``ReducedWindowedDStream`` each spell this out; here it is said once)."""

from __future__ import annotations

from reliable_kafka.dstream.dstream import DStream


class WindowOverParent(DStream):
    def __init__(self, parent: DStream, window_duration_ms: int, slide_duration_ms: int) -> None:
        for what, duration in (("window", window_duration_ms), ("slide", slide_duration_ms)):
            if duration % parent.slide_duration_ms:
                raise ValueError(
                    f"The {what} duration of windowed DStream ({duration} ms) must be a multiple "
                    f"of the slide duration of parent DStream ({parent.slide_duration_ms} ms)"
                )
        super().__init__(parent.ssc)
        self.parent = parent
        self.window_duration_ms = window_duration_ms
        self._slide_duration_ms = slide_duration_ms

    @property
    def slide_duration_ms(self) -> int:
        return self._slide_duration_ms

    @property
    def dependencies(self) -> list[DStream]:
        return [self.parent]

    @property
    def parent_remember_duration_ms(self) -> int | None:
        # A window reaches one window back from the oldest time this stream must remember.
        if self.remember_duration_ms is None:
            return None
        return self.remember_duration_ms + self.window_duration_ms
