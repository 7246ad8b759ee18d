# The one runtime image for every Magnetar process (bookie, broker, operator, workload). The
# entrypoint derives per-pod settings (advertised address, rack) and runs `magnetar`; the pod's
# args pick the component, e.g. `bookie --config /etc/magnetar/bookie.yaml` (see images/).
FROM python:3.11-slim AS build
WORKDIR /src
COPY . .
RUN pip install --no-cache-dir build && python -m build --wheel --outdir /wheels

FROM python:3.11-slim
RUN useradd --system --uid 10000 --home /var/lib/magnetar magnetar \
 && mkdir -p /var/lib/magnetar /etc/magnetar && chown magnetar /var/lib/magnetar
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/*.whl)[operator,chaos]" && rm -rf /wheels
COPY images/entrypoint.sh /usr/local/bin/magnetar-entrypoint
COPY images/healthcheck.py /usr/local/bin/magnetar-healthcheck
USER 10000
WORKDIR /var/lib/magnetar
EXPOSE 3181 6650 8080
ENTRYPOINT ["/usr/local/bin/magnetar-entrypoint"]
CMD ["--help"]
