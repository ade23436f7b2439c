"""Computes testdata/vector.json with Python's cryptography (OpenSSL), independently of the Go
code: a WeChat Pay public key, a TRANSACTION.SUCCESS notification whose resource is
AEAD_AES_256_GCM under an API v3 key, and its SHA256withRSA signature over
"ts\nnonce\nbody\n". Run: python3 vector.py > vector.json"""
import base64, json, os
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
v3key = "Vq8kD3pL0tZr7NcYx2mWb5HsJ4eFgA6u"
mchid, appid = "1900000109", "wxd678efh567hg6787"
plain = json.dumps({"mchid": mchid, "appid": appid, "out_trade_no": "2503011200001234123456789012",
    "transaction_id": "4200000000202503011234567890", "trade_type": "NATIVE", "trade_state": "SUCCESS",
    "trade_state_desc": "支付成功", "bank_type": "OTHERS", "success_time": "2025-03-01T20:00:05+08:00",
    "payer": {"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
    "amount": {"total": 1998, "payer_total": 1998, "currency": "CNY", "payer_currency": "CNY"}},
    ensure_ascii=False, separators=(",", ":")).encode()
nonce = "fdasflkja484"
ct = AESGCM(v3key.encode()).encrypt(nonce.encode(), plain, b"transaction")
body = json.dumps({"id": "EV-2018022511223320873", "create_time": "2025-03-01T20:00:05+08:00",
    "resource_type": "encrypt-resource", "event_type": "TRANSACTION.SUCCESS", "summary": "支付成功",
    "resource": {"original_type": "transaction", "algorithm": "AEAD_AES_256_GCM",
        "ciphertext": base64.b64encode(ct).decode(), "associated_data": "transaction", "nonce": nonce}},
    ensure_ascii=False, separators=(",", ":"))
ts, hnonce = "1740830405", "593BEC0C930BF1AFEB40B4A08C8FB242"
sig = key.sign(f"{ts}\n{hnonce}\n{body}\n".encode(), padding.PKCS1v15(), hashes.SHA256())
print(json.dumps({
    "public_key_id": "PUB_KEY_ID_0119000001092025030100000000000001",
    "public_key_pem": key.public_key().public_bytes(serialization.Encoding.PEM,
        serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
    "api_v3_key": v3key, "mchid": mchid, "appid": appid,
    "plaintext": plain.decode(),
    "headers": {"Wechatpay-Timestamp": ts, "Wechatpay-Nonce": hnonce,
        "Wechatpay-Serial": "PUB_KEY_ID_0119000001092025030100000000000001",
        "Wechatpay-Signature": base64.b64encode(sig).decode(),
        "Wechatpay-Signature-Type": "WECHATPAY2-SHA256-RSA2048"},
    "body": body}, ensure_ascii=False, indent=1))
