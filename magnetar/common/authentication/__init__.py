"""Authentication as Pulsar's (one mechanism for every port that checks it): who a caller is.

* ``keys``: the signing keys of tokens, read from Pulsar's ``data:`` / ``file:`` forms, and made;
* ``tokens``: JSON Web Tokens made and checked (PyJWT), as ``pulsar tokens`` does;
* ``providers``: the broker's side, Pulsar's AuthenticationProvider: a method name and the data a
  client sent (CONNECT's ``auth_method_name`` / ``auth_data``, an HTTP ``Authorization`` header)
  become a role, or an AuthenticationFailed saying why;
* ``client``: the client's side, Pulsar's ``--auth-plugin`` / ``--auth-params``, for the broker's
  own calls and the command-line tools.
"""
