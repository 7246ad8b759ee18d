# The one runtime image for every Magnetar process (bookie, broker, operator, workload). The
# entrypoint derives per-pod settings (advertised address, rack) and runs `magnetar`; the pod's
# args pick the component, e.g. `bookie --config /etc/magnetar/bookie.yaml` (see images/).
#
# BASE_IMAGE: any Debian-like image with Python 3.11 and its venv module. Users get the official
# python:3.11-slim; `make image` passes a base it made with debootstrap from Debian's packages
# (magnetar/python-base:3.11-bookworm, see images/build.sh), for machines no image registry reaches.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
# WHEELHOUSE: a folder of the build context holding the project's wheel and every dependency's,
# installed with no index at all (`make image` fills .wheelhouse/ on the host, whose pip reaches
# PyPI, while a build there may not). Empty: the project is built here and its dependencies come
# from PyPI.
ARG WHEELHOUSE=
WORKDIR /src
# The wheelhouse alone where there is one, so that a change to a file the wheels do not hold (a
# test, the docs) leaves this layer and the install below in the build cache; else the sources.
COPY ${WHEELHOUSE:-.} /src/${WHEELHOUSE}
# A virtual environment, the same path on either base (python:3.11-slim has python in /usr/local,
# Debian in /usr): the runtime stage copies it whole and puts it first on PATH.
RUN python3 -m venv /opt/magnetar \
 && if [ -n "$WHEELHOUSE" ]; then \
      /opt/magnetar/bin/pip install --no-cache-dir --no-index --find-links "/src/$WHEELHOUSE" \
        "magnetar[operator,chaos,workload]"; \
    else \
      /opt/magnetar/bin/pip install --no-cache-dir "/src[operator,chaos,workload]"; \
    fi \
 # pip is only needed to install: nothing installs into the image later (the byte code pip
 # compiled stays: the uid-10000 user could not write it, and every start would compile again)
 && /opt/magnetar/bin/pip uninstall --yes --quiet pip

FROM ${BASE_IMAGE}
RUN groupadd --system --gid 10000 magnetar \
 && useradd --system --uid 10000 --gid 10000 --home /var/lib/magnetar magnetar \
 && mkdir -p /var/lib/magnetar /etc/magnetar && chown magnetar /var/lib/magnetar
COPY --from=build /opt/magnetar /opt/magnetar
ENV PATH=/opt/magnetar/bin:$PATH
COPY images/entrypoint.sh /usr/local/bin/magnetar-entrypoint
USER 10000:10000
WORKDIR /var/lib/magnetar
EXPOSE 3181 6650 8080
# VERSION_LABEL: a build's label, reported after the release (`magnetar --version` says 0.1.0+LABEL,
# and so does a broker's CONNECTED): `images/build.sh --version-label LABEL` builds a second image
# of the same sources this way, every layer but this setting taken from the cache.
ARG VERSION_LABEL=
ENV MAGNETAR_VERSION_LABEL=${VERSION_LABEL}
ENTRYPOINT ["/usr/local/bin/magnetar-entrypoint"]
CMD ["--help"]
