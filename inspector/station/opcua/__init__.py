"""OPC UA for the station: a server with the PLC handshake (optional extra ``inspector[opcua]``).

:mod:`~inspector.station.opcua.handshake` holds the state machine and the durable result
buffer (no OPC UA code); :mod:`~inspector.station.opcua.server` serves them with asyncua.
"""
