"""The console mailer keeps each e-mail whole when the outbox prints several at once (one lock for
the process, not one per backend instance as Django's has)."""

from __future__ import annotations

import threading
import time

from django.core.mail import EmailMessage
from django.core.mail.backends.console import EmailBackend as DjangoConsole

from runs.notifications.console_mail import EmailBackend


class SlowStream:
    """A stdout whose writes take a moment, as a busy terminal's do: the widest window to interleave."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        time.sleep(0.002)
        self.parts.append(text)

    def flush(self) -> None:
        pass


def _print_at_once(backend_class, count: int = 6) -> list[str]:
    stream = SlowStream()
    start = threading.Barrier(count)

    def send(i: int) -> None:
        message = EmailMessage(
            f"Gate {i}", f"Approve: http://wb.test/gate-links/{i}\n", "wb@x.test", [f"p{i}@x.test"]
        )
        start.wait()
        backend_class(stream=stream).send_messages([message])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [block for block in "".join(stream.parts).split("-" * 79) if block.strip()]


def _whole(block: str) -> bool:
    subject = block.split("Subject: Gate ", 1)[1].split("\n", 1)[0] if "Subject: Gate " in block else None
    return subject is not None and f"gate-links/{subject}\n" in block and block.count("Subject:") == 1


def test_messages_printed_at_once_come_out_whole():
    blocks = _print_at_once(EmailBackend)
    assert len(blocks) == 6 and all(_whole(block) for block in blocks), blocks


def test_django_console_backend_alone_interleaves_them():
    """The reason for the subclass: without the shared lock the same sends are cut into each other."""
    blocks = _print_at_once(DjangoConsole)
    assert not (len(blocks) == 6 and all(_whole(block) for block in blocks))
